"""com.microsoft DynamicQuantizeLSTM (graph/contrib/recurrent.py) against onnxruntime on the model that
onnxruntime's own ``quantize_dynamic`` writes from an fp32 LSTM: per-direction and per-column int8 weights,
bidirectional and reverse, initial states, on every kernel class.

onnxruntime quantizes X and H(t-1) to uint8 on the fly; with several threads it splits a batch of 2+ rows into
chunks with their own H range, so the reference session runs on one thread (batch 1 does not depend on it)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper
from onnxruntime.quantization import QuantType, quantize_dynamic
from oprefs import TARGETS, tolerance

from webinfer.backend import WebinferRep
from webinfer.build import build


def quantized_lstm(tmp_path, *, hidden, inp, direction, batch, steps, per_channel, init, seed=0):
    """An fp32 LSTM quantized by onnxruntime (it writes DynamicQuantizeLSTM), and feeds for it."""
    rng = np.random.default_rng(seed)
    d = 2 if direction == "bidirectional" else 1
    inits = {"W": rng.uniform(-1, 1, (d, 4 * hidden, inp)), "R": rng.uniform(-1, 1, (d, 4 * hidden, hidden)),
             "B": rng.uniform(-0.5, 0.5, (d, 8 * hidden))}
    names = ["x", "W", "R", "B"] + (["", "h0", "c0"] if init else [])
    inputs = [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [steps, batch, inp])]
    inputs += [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [d, batch, hidden]) for n in names[5:]]
    graph = helper.make_graph(
        [helper.make_node("LSTM", names, ["y", "y_h", "y_c"], hidden_size=hidden, direction=direction)], "lstm",
        inputs, [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in ("y", "y_h", "y_c")],
        [onnx.numpy_helper.from_array(v.astype(np.float32), n) for n, v in inits.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "lstm.onnx")
    quantize_dynamic(tmp_path / "lstm.onnx", tmp_path / "lstm_q.onnx", weight_type=QuantType.QInt8,
                     per_channel=per_channel, op_types_to_quantize=["LSTM"])
    model = onnx.load(tmp_path / "lstm_q.onnx")
    assert [n.op_type for n in model.graph.node] == ["DynamicQuantizeLSTM"]
    feeds = {"x": rng.uniform(-2, 2, (steps, batch, inp)).astype(np.float32)}
    if init:
        feeds.update({n: rng.uniform(-1, 1, (d, batch, hidden)).astype(np.float32) for n in ("h0", "c0")})
    return model, feeds


def onnxruntime_one_thread(model, feeds):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"]).run(None, feeds)


CASES = [  # hidden, input, direction, batch, steps, per_channel, initial states
    (16, 8, "bidirectional", 1, 5, False, False),
    (16, 12, "forward", 3, 4, True, True),
    (24, 8, "reverse", 2, 4, False, True),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[2]}-b{c[3]}-{'channel' if c[5] else 'direction'}")
def test_dynamic_quantize_lstm_equals_onnxruntime(case, target, tmp_path):
    hidden, inp, direction, batch, steps, per_channel, init = case
    model, feeds = quantized_lstm(tmp_path, hidden=hidden, inp=inp, direction=direction, batch=batch, steps=steps,
                                  per_channel=per_channel, init=init)
    want = onnxruntime_one_thread(model, feeds)
    got = WebinferRep(model, target=target).run(feeds)
    rtol, atol = tolerance(target, 1e-4, 1e-5)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def test_weights_stay_one_byte_each(tmp_path):
    """A 128-unit layer: the artifact holds its W and R as packed bytes (plus per-row scales), not as f32."""
    model, feeds = quantized_lstm(tmp_path, hidden=128, inp=64, direction="forward", batch=1, steps=3,
                                  per_channel=False, init=True, seed=1)
    build(model, str(tmp_path / "art"), target="software")
    manifest = json.loads((tmp_path / "art" / "manifest.json").read_text())
    weight_bytes = sum(c[2] for t in manifest["tensors"] if t["kind"] == "weight" for c in t["chunks"])
    quantized = 4 * 128 * (64 + 128)  # one byte per weight of W and R
    assert weight_bytes < 1.5 * quantized, f"{weight_bytes} bytes of weights for {quantized} int8 weights"
    np.testing.assert_allclose(WebinferRep(model, target="software").run(feeds)[0],
                               onnxruntime_one_thread(model, feeds)[0], rtol=1e-4, atol=1e-5)
