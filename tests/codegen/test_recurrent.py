"""RNN, GRU, LSTM against onnxruntime (onnx's ReferenceEvaluator gets reverse RNN/GRU wrong and refuses
bidirectional RNN): every direction, sequence_lens, initial states, Y/Y_h/Y_c, both layouts, GRU's
linear_before_reset, clip, peepholes and non-default activations, on every kernel class.

onnxruntime refuses layout=1, so a layout-1 node is compared with onnxruntime's layout-0 node over the
transposed inputs (outputs transposed back)."""

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import helper
from oprefs import TARGETS, make_model, tolerance

from webinfer.backend import WebinferRep

sys.path.insert(0, str(Path(__file__).parents[1] / "contrib"))
from ort_ref import ort_run  # noqa: E402

G = {"RNN": 1, "GRU": 3, "LSTM": 4}
TIME_MAJOR = ("x", "h0", "c0")  # inputs whose first two axes swap with the layout


def _case(op, direction, *, layout=0, lens=False, init=False, peep=False, h=4, t=3, b=2, i=5, seed=0):
    rng = np.random.default_rng(seed)

    def f(*s):
        return rng.uniform(-1, 1, size=s).astype(np.float32)

    d = 2 if direction == "bidirectional" else 1
    feeds = {"x": f(t, b, i), "w": f(d, G[op] * h, i), "r": f(d, G[op] * h, h), "b": f(d, 2 * G[op] * h)}
    if lens or init or peep:
        feeds["lens"] = np.array([t, t - 1][:b] + [1] * (b - 2), np.int32) if lens else np.full([b], t, np.int32)
    if init or peep:
        feeds["h0"] = f(d, b, h)
        if op == "LSTM":
            feeds["c0"] = f(d, b, h)
    if peep:
        feeds["p"] = f(d, 3 * h)
    if layout:
        feeds = {k: (np.ascontiguousarray(v.swapaxes(0, 1)) if k in TIME_MAJOR else v) for k, v in feeds.items()}
    return feeds


def check(op, direction, feeds, outs=None, layout=0, target="software", **attrs):
    """webinfer's node (kernel class ``target``) equals onnxruntime's."""
    outs = outs or ["y", "y_h"] + (["y_c"] if op == "LSTM" else [])
    attrs = {"hidden_size": feeds["r"].shape[-1], "direction": direction, **attrs}
    node = helper.make_node(op, list(feeds), outs, layout=layout, **attrs)
    model = make_model([node], feeds, [o for o in outs if o], opset=14)
    if layout:  # onnxruntime: the same node at layout 0
        ref_feeds = {k: (np.ascontiguousarray(v.swapaxes(0, 1)) if k in TIME_MAJOR else v) for k, v in feeds.items()}
        ref_node = helper.make_node(op, list(feeds), outs, layout=0, **attrs)
        want = ort_run(make_model([ref_node], ref_feeds, [o for o in outs if o], opset=14), ref_feeds)
        want = [w.transpose(2, 0, 1, 3) if w.ndim == 4 else w.swapaxes(0, 1) for w in want]
    else:
        want = ort_run(model, feeds)
    got = WebinferRep(model, target=target).run(feeds)
    rtol, atol = tolerance(target, 1e-4, 1e-5)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_bidirectional_per_kernel_class(op, target):
    check(op, "bidirectional", _case(op, "bidirectional", init=True), target=target)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
def test_directions_lengths_states_layouts(op, direction, layout):
    check(op, direction, _case(op, direction, layout=layout, lens=True, init=True, b=3), layout=layout)


@pytest.mark.parametrize("lbr", [0, 1])
def test_gru_linear_before_reset(lbr):
    check("GRU", "bidirectional", _case("GRU", "bidirectional", lens=True, seed=1), linear_before_reset=lbr)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_clip(op):
    feeds = _case(op, "bidirectional", seed=2)
    feeds["x"] *= 4  # gate inputs well past the threshold
    check(op, "bidirectional", feeds, clip=0.3)


def test_lstm_peepholes_layout1():
    check("LSTM", "bidirectional", _case("LSTM", "bidirectional", peep=True, layout=1, seed=3), layout=1)


@pytest.mark.parametrize("op,acts", [
    ("LSTM", ["HardSigmoid", "Relu", "Softsign"]),
    ("GRU", ["Sigmoid", "Tanh", "HardSigmoid", "Relu"]),
    ("RNN", ["Relu", "Tanh"]),
])
def test_activations(op, acts):
    direction = "bidirectional" if op != "LSTM" else "forward"
    check(op, direction, _case(op, direction, seed=4), activations=acts)


@pytest.mark.parametrize("outs", [["", "y_h"], ["y"], ["", "", "y_c"]])
def test_lstm_output_subsets(outs):
    check("LSTM", "reverse", _case("LSTM", "reverse", init=True, seed=5), outs=outs)


@pytest.mark.parametrize("op,direction,layout", [("LSTM", "bidirectional", 0), ("GRU", "reverse", 1),
                                                 ("RNN", "forward", 0)])
def test_symbolic_sequence_and_batch_one_build(op, direction, layout):
    """Sequence length and batch symbolic: one artifact (a runtime loop over t) for every (T, B)."""
    ref = _case(op, direction, init=True, lens=True, t=4, b=2, seed=6)
    d, h, i = ref["w"].shape[0], ref["r"].shape[-1], ref["x"].shape[-1]
    seq = ["T", "B"] if not layout else ["B", "T"]
    outs = ["y", "y_h"] + (["y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, list(ref), outs, hidden_size=h, direction=direction, layout=layout)
    shapes = {"x": seq + [i], "lens": ["B"], "h0": ([d, "B", h] if not layout else ["B", d, h])}
    shapes["c0"] = shapes["h0"]
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, 6 if n == "lens" else 1, shapes.get(n, v.shape))
                                        for n, v in ref.items()], [helper.make_empty_tensor_value_info(o) for o in outs])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    rep = WebinferRep(model, target="software")
    for t, b in ((4, 2), (7, 3), (1, 1)):
        feeds = _case(op, direction, layout=layout, init=True, lens=True, t=t, b=b, seed=t)
        feeds = {k: v for k, v in feeds.items() if k in ref}
        if layout:
            ref_feeds = {k: (np.ascontiguousarray(v.swapaxes(0, 1)) if k in TIME_MAJOR else v) for k, v in feeds.items()}
            ref_model = make_model([helper.make_node(op, list(ref), outs, hidden_size=h, direction=direction)],
                                   ref_feeds, outs, opset=14)
            want = ort_run(ref_model, ref_feeds)
            want = [w.transpose(2, 0, 1, 3) if w.ndim == 4 else w.swapaxes(0, 1) for w in want]
        else:
            want = ort_run(make_model([node], feeds, outs, opset=14), feeds)
        got = rep.run(feeds)
        for g_, w in zip(got, want, strict=True):
            assert g_.shape == w.shape, (t, b)
            np.testing.assert_allclose(g_, w, rtol=1e-4, atol=1e-5, err_msg=f"T={t} B={b}")
    assert len(rep._sessions) == 1, "built more than once"
