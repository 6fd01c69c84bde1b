"""(De)quantization against onnx.reference: per-tensor, per-axis, blocked, saturation, half-to-even; the
dynamic quantizer's MatMulInteger / ConvInteger per kernel class against onnxruntime (exact int32)."""

import numpy as np
import pytest
from onnx import helper
from oprefs import TARGETS, check_node, make_model

rng = np.random.default_rng(0)


@pytest.mark.parametrize("zp_dtype", [np.uint8, np.int8, np.uint16, np.int16])
def test_quantize_per_tensor(zp_dtype):
    x = rng.uniform(-300, 300, size=(3, 7)).astype(np.float32)
    x[0, :4] = [0.5, 1.5, 2.5, -2.5]  # ties round to even
    zp = np.array(3, zp_dtype)
    _, _, _, gpu = check_node("QuantizeLinear", {"x": x, "s": np.float32(1.0), "zp": zp}, opset=21)
    assert gpu
    check_node("QuantizeLinear", {"x": x, "s": np.float32(2.0)}, initializers={"zp": zp}, opset=21)


def test_quantize_default_uint8_and_output_dtype():
    x = rng.uniform(-10, 300, size=(5,)).astype(np.float32)
    check_node("QuantizeLinear", {"x": x, "s": np.float32(0.7)}, opset=21)
    check_node("QuantizeLinear", {"x": x, "s": np.float32(0.7)}, opset=21, output_dtype=3)


def test_quantize_per_axis_and_blocked():
    x = rng.uniform(-50, 50, size=(2, 3, 4)).astype(np.float32)
    s = rng.uniform(0.2, 1, size=(3,)).astype(np.float32)
    zp = rng.integers(-5, 5, size=(3,)).astype(np.int8)
    check_node("QuantizeLinear", {"x": x, "s": s, "zp": zp}, opset=21, axis=1)
    sb = rng.uniform(0.2, 1, size=(2, 3, 2)).astype(np.float32)
    zb = rng.integers(0, 20, size=(2, 3, 2)).astype(np.uint8)
    check_node("QuantizeLinear", {"x": x, "s": sb, "zp": zb}, opset=21, axis=2, block_size=2)


def test_dequantize():
    x = rng.integers(0, 256, size=(2, 3, 4)).astype(np.uint8)
    check_node("DequantizeLinear", {"x": x, "s": np.float32(0.25), "zp": np.uint8(128)}, opset=21)
    s = rng.uniform(0.1, 1, size=(4,)).astype(np.float32)
    zp = rng.integers(0, 255, size=(4,)).astype(np.uint8)
    check_node("DequantizeLinear", {"x": x, "s": s, "zp": zp}, opset=21, axis=-1)
    xi = rng.integers(-128, 128, size=(4, 6)).astype(np.int8)
    sb = rng.uniform(0.1, 1, size=(2, 6)).astype(np.float32)
    check_node("DequantizeLinear", {"x": xi, "s": sb}, opset=21, axis=0, block_size=2)


@pytest.mark.parametrize("lo,hi,shape", [(-3, 5, (3, 4)), (1, 5, (7,)), (-5, -1, (300,)), (0, 0, (2, 2))])
def test_dynamic_quantize(lo, hi, shape):
    x = rng.uniform(lo, hi, size=shape).astype(np.float32)
    check_node("DynamicQuantizeLinear", {"x": x}, n_outputs=3, opset=11)


# -- the dynamic quantizer's integer kernels, per kernel class, against onnxruntime ---------------------------
def _ort_equal(model, feeds, target):
    from contrib.ort_ref import ort_run

    from webinfer.backend import WebinferRep

    want = ort_run(model, feeds)
    got = WebinferRep(model, target=target).run(feeds)
    for w, g in zip(want, got):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("rows,k,n,w_dtype,zero", [(1, 64, 24, np.int8, "none"), (7, 96, 40, np.int8, "a"),
                                                   (5, 33, 17, np.uint8, "both"), (3, 64, 20, np.uint8, "column")])
def test_matmul_integer(rows, k, n, w_dtype, zero, target):
    """uint8 activations x int8/uint8 constant weights (read packed), zero points per tensor or per column."""
    a = rng.integers(0, 256, (2, rows, k)).astype(np.uint8)
    w = rng.integers(*((-128, 128) if w_dtype == np.int8 else (0, 256)), (k, n)).astype(w_dtype)
    inits = {"w": w}
    names = ["a", "w"]
    if zero != "none":
        inits["za"] = np.uint8(117)
        names.append("za")
    if zero in ("both", "column"):
        inits["zw"] = (rng.integers(100, 150, n) if zero == "column" else np.array(131)).astype(w_dtype)
        names.append("zw")
    model = make_model([helper.make_node("MatMulInteger", names, ["y"])], {"a": a}, ["y"], inits, opset=17)
    _ort_equal(model, {"a": a}, target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("w_dtype,w_zero,group", [(np.int8, 0, 1), (np.uint8, 128, 1), (np.int8, 0, 4)])
def test_conv_integer(w_dtype, w_zero, group, target):
    x = rng.integers(0, 256, (1, 8, 9, 9)).astype(np.uint8)
    w = rng.integers(*((-128, 128) if w_dtype == np.int8 else (0, 256)), (16, 8 // group, 3, 3)).astype(w_dtype)
    inits = {"w": w, "zx": np.uint8(121), "zw": np.array(w_zero, w_dtype)}
    node = helper.make_node("ConvInteger", ["x", "w", "zx", "zw"], ["y"], pads=[1, 1, 1, 1], strides=[2, 1],
                            group=group)
    model = make_model([node], {"x": x}, ["y"], inits, opset=17)
    _ort_equal(model, {"x": x}, target)
