"""CumSum / CumProd over rows longer than 65535 elements (codegen/kernels/long_scan.py), against numpy and
onnxruntime: lavapipe stopped the one-invocation-a-row scan at element 65535 (a vocoder's cumulative sum over
a waveform's samples), every later element left unwritten."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from oprefs import make_model

from webinfer.backend import WebinferRep

rng = np.random.default_rng(11)


def _model(op, x, axis, **attrs):
    return make_model([helper.make_node(op, ["x", "axis"], ["y"], **attrs)], {"x": x}, ["y"],
                      {"axis": np.array(axis, np.int64)})


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_cumsum_of_integers_past_the_loop_limit(dtype, exclusive, reverse):
    """Exact: integers, every element equal to onnxruntime's, along the last axis and along the first."""
    x = rng.integers(-50, 50, size=(3, 70_001)).astype(dtype)
    for axis, arr in ((1, x), (0, np.ascontiguousarray(x.T))):
        model = _model("CumSum", arr, axis, exclusive=exclusive, reverse=reverse)
        got = WebinferRep(model).run({"x": arr})[0]
        np.testing.assert_array_equal(got, _ort(model, {"x": arr}), err_msg=f"axis {axis}")


@pytest.mark.parametrize("target", ["software", "gpu"])
def test_cumsum_of_a_waveform(target):
    """A float32 row of 300 000 samples (a vocoder's phase): within float32 rounding of numpy's float64 scan."""
    x = (rng.random((1, 300_000)) * 0.02).astype(np.float32)
    model = _model("CumSum", x, -1)
    got = WebinferRep(model, target=target).run({"x": x})[0]
    exact = np.cumsum(x.astype(np.float64), axis=-1)
    np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got, _ort(model, {"x": x}), rtol=1e-4, atol=1e-2)


def test_cumprod_past_the_loop_limit():
    """CumProd (opset 26 is not in onnxruntime yet: numpy is the reference) of +-1 integers, exact, reversed."""
    x = rng.choice(np.array([-1, 1, 1, 1], np.int32), size=(2, 66_000))
    model = _model("CumProd", x, 1, reverse=1)
    model.opset_import[0].version = 26
    got = WebinferRep(model).run({"x": x})[0]
    np.testing.assert_array_equal(got, np.flip(np.cumprod(np.flip(x, 1), axis=1), 1))


def test_cumsum_over_a_symbolic_length():
    """The sample count is symbolic (a TTS model for any text): one build right at 100, 70 000 and 140 000."""
    graph = helper.make_graph(
        [helper.make_node("CumSum", ["x", "axis"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.INT32, [2, "n"])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
        [helper.make_tensor("axis", TensorProto.INT64, [], [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    rep = WebinferRep(model)
    for n in (100, 70_000, 140_000):
        x = rng.integers(-9, 9, size=(2, n)).astype(np.int32)
        np.testing.assert_array_equal(rep.run({"x": x})[0], np.cumsum(x, axis=1, dtype=np.int32), err_msg=str(n))
    assert len(rep._sessions) == 1, "built more than once"


@pytest.mark.parametrize("reduction", ["add", "max"])
def test_scatter_reductions_over_many_updates(reduction):
    """ScatterND / ScatterElements folding 70 000 updates (a point cloud's scatter-add into cells): every output
    element walked every update in one invocation and lavapipe stopped it at 65535 (every cell wrong); now
    passes of 32768 updates, in order, each reading the last pass's result."""
    feeds = {"d": rng.standard_normal(10).astype(np.float32), "i": rng.integers(-10, 10, (70_000, 1)),
             "u": rng.standard_normal(70_000).astype(np.float32)}
    model = make_model([helper.make_node("ScatterND", ["d", "i", "u"], ["y"], reduction=reduction)], feeds, ["y"])
    np.testing.assert_allclose(WebinferRep(model).run(feeds)[0], _ort(model, feeds), rtol=1e-4, atol=1e-3)
    feeds = {"d": rng.standard_normal((2, 7)).astype(np.float32), "i": rng.integers(0, 7, (2, 70_000)),
             "u": rng.standard_normal((2, 70_000)).astype(np.float32)}
    model = make_model([helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], axis=1, reduction=reduction)],
                       feeds, ["y"])
    np.testing.assert_allclose(WebinferRep(model).run(feeds)[0], _ort(model, feeds), rtol=1e-4, atol=1e-3)
