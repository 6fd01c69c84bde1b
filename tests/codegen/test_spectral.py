"""DFT, STFT, windows and MelWeightMatrix against onnx.reference (float64 FFTs: direct sums of up to 64 terms
in f32 are compared at 1e-4 of the largest output)."""

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator
from oprefs import check_node, make_model

from webinfer.backend import WebinferRep

rng = np.random.default_rng(0)


def _check(op: str, names: list[str], feeds: dict, opset: int, **attrs) -> None:
    model = make_model([helper.make_node(op, names, ["y"], **attrs)], feeds, ["y"], opset=opset)
    (want,) = ReferenceEvaluator(model).run(None, feeds)
    rep = WebinferRep(model)
    (got,) = rep.run(feeds)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * max(1.0, float(np.abs(want).max())))
    assert any(p["op"] == op and p["where"] == "gpu" for p in rep.placement)


@pytest.mark.parametrize("shape,axis,length,inverse,onesided", [
    ((2, 12, 1), 1, None, 0, 0), ((2, 12, 1), 1, None, 0, 1), ((3, 9, 2), 1, None, 1, 0),
    ((2, 5, 7, 2), 1, 8, 0, 0), ((2, 5, 7, 1), 2, 4, 0, 1), ((1, 6, 3, 2), 1, 10, 1, 1), ((1, 5, 2), -2, 9, 1, 1),
    ((4, 64, 1), 1, None, 0, 1)])
def test_dft(shape, axis, length, inverse, onesided):
    """Real/complex signals, padded and truncated lengths, inverse, one-sided and the inverse real transform."""
    feeds = {"x": rng.standard_normal(shape).astype(np.float32)}
    if length is not None:
        feeds["n"] = np.array(length, np.int64)
    feeds["axis"] = np.array(axis, np.int64)
    _check("DFT", ["x", "n" if length is not None else "", "axis"], feeds, 20, inverse=inverse, onesided=onesided)


def test_dft_opset17_attribute_axis():
    _check("DFT", ["x"], {"x": rng.standard_normal((3, 8, 2)).astype(np.float32)}, 17, axis=1, inverse=1)


@pytest.mark.parametrize("complex_,onesided", [(False, 1), (True, 0)])
def test_stft(complex_, onesided):
    x = rng.standard_normal((2, 50, 2 if complex_ else 1)).astype(np.float32)
    step = np.array(6, np.int64)
    _check("STFT", ["x", "step", "w"], {"x": x, "step": step, "w": np.hanning(12).astype(np.float32)}, 17,
           onesided=onesided)
    _check("STFT", ["x", "step", "", "len"], {"x": x, "step": step, "len": np.array(10, np.int64)}, 17,
           onesided=onesided)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("size,periodic", [(10, 1), (7, 0), (1, 1), (100, 0)])
def test_windows(op, size, periodic):
    check_node(op, {"size": np.array(size, np.int32)}, opset=17, periodic=periodic, atol=1e-6)


@pytest.mark.parametrize("mels,length,rate,lo,hi", [(8, 16, 8192, 0.0, 4096.0), (5, 32, 16000, 100.0, 7000.0)])
def test_mel_weight_matrix(mels, length, rate, lo, hi):
    feeds = {"m": np.array(mels, np.int32), "n": np.array(length, np.int32), "r": np.array(rate, np.int32),
             "lo": np.array(lo, np.float32), "hi": np.array(hi, np.float32)}
    check_node("MelWeightMatrix", feeds, opset=17)
