"""com.microsoft FusedMatMul and the QLinear*/QGemm ops (graph/contrib/linear.py, qlinear.py) against onnxruntime.
Quantized outputs may sit one code from onnxruntime's where it computes in another order (a rounding tie):
those are counted and must be rare."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from webinfer.backend import WebinferRep

from .ort_ref import MS, check_ort, contrib_model, ort_run

RNG = np.random.default_rng(5)


@pytest.mark.parametrize("target", ["software", "gpu"])
@pytest.mark.parametrize("a_shape,b_shape,attrs", [
    ((2, 5, 7), (7, 3), {}),
    ((2, 7, 5), (2, 3, 7), {"transA": 1, "transB": 1, "alpha": 0.5}),
    ((4, 5), (3, 4), {"transA": 1, "transB": 1}),
    ((5, 2, 7), (2, 7, 3), {"transBatchA": 1, "alpha": 2.0}),
    ((2, 5, 7), (7, 2, 3), {"transBatchB": 1}),
    ((5, 2, 7), (3, 2, 7), {"transBatchA": 1, "transBatchB": 1, "transB": 1}),
    ((7, 2, 5), (2, 7, 3), {"transBatchA": 1, "transA": 1}),
    ((2, 3, 4, 6), (2, 3, 6, 5), {"alpha": -1.5}),
])
def test_fused_matmul(a_shape, b_shape, attrs, target):
    a = RNG.standard_normal(a_shape).astype(np.float32)
    w = RNG.standard_normal(b_shape).astype(np.float32)
    node = helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain=MS, **attrs)
    check_ort(contrib_model([node], {"a": a, "b": w}, ["y"]), {"a": a, "b": w}, target=target)


def test_fused_matmul_constant_weight():
    a = RNG.standard_normal((3, 6, 8)).astype(np.float32)
    w = RNG.standard_normal((5, 8)).astype(np.float32)
    node = helper.make_node("FusedMatMul", ["a", "w"], ["y"], domain=MS, transB=1, alpha=0.25)
    check_ort(contrib_model([node], {"a": a}, ["y"], {"w": w}), {"a": a})


def _close_codes(model, feeds, max_off_fraction=0.05):
    """Quantized outputs equal onnxruntime's, up to one code on at most a few elements (ties)."""
    want = ort_run(model, feeds)
    got = WebinferRep(model).run(feeds)
    for w, g in zip(want, got):
        assert g.shape == w.shape and g.dtype == w.dtype
        diff = np.abs(g.astype(np.int32) - w.astype(np.int32))
        assert diff.max() <= 1, f"{diff.max()} codes off"
        assert (diff > 0).mean() <= max_off_fraction, f"{(diff > 0).sum()} of {diff.size} one code off"


def _qparams(dtype, scale):
    zp = np.array(3 if dtype == np.int8 else 131, dtype)
    return np.array(scale, np.float32), zp


def _codes(dtype, shape):
    lo, hi = (-128, 128) if dtype == np.int8 else (0, 256)
    return RNG.integers(lo, hi, shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_qlinear_binary(op, dtype):
    a, c = _codes(dtype, (2, 3, 8)), _codes(dtype, (3, 8))
    sa, za = _qparams(dtype, 0.031)
    sb, zb = _qparams(dtype, 0.027)
    sy, zy = _qparams(dtype, 0.05 if op == "QLinearAdd" else 0.9)
    node = helper.make_node(op, ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"], domain=MS)
    inits = {"sa": sa, "za": za, "sb": sb, "zb": zb, "sy": sy, "zy": zy}
    _close_codes(contrib_model([node], {"a": a, "b": c}, ["y"], inits), {"a": a, "b": c})


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("op,attrs,out_scale", [
    ("QLinearSigmoid", {}, 1 / 256),
    ("QLinearLeakyRelu", {"alpha": 0.1}, 0.04),
    ("QLinearGlobalAveragePool", {}, 0.02),
    ("QLinearAveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, 0.02),
    ("QLinearSoftmax", {"axis": -1, "opset": 13}, 1 / 256),
])
def test_qlinear_unary(op, attrs, out_scale, dtype):
    x = _codes(dtype, (1, 4, 7, 7))
    sx, zx = _qparams(dtype, 0.05)
    sy, zy = _qparams(dtype, out_scale)
    if op == "QLinearSoftmax" and dtype == np.uint8:
        zy = np.array(0, dtype)
    node = helper.make_node(op, ["x", "sx", "zx", "sy", "zy"], ["y"], domain=MS, **attrs)
    model = contrib_model([node], {"x": x}, ["y"], {"sx": sx, "zx": zx, "sy": sy, "zy": zy})
    _close_codes(model, {"x": x})


def test_qlinear_concat():
    a, c = _codes(np.uint8, (1, 2, 5)), _codes(np.uint8, (1, 3, 5))
    node = helper.make_node("QLinearConcat", ["sy", "zy", "a", "sa", "za", "b", "sb", "zb"], ["y"], domain=MS, axis=1)
    inits = {"sy": np.float32(0.04), "zy": np.uint8(120), "sa": np.float32(0.03), "za": np.uint8(100),
             "sb": np.float32(0.05), "zb": np.uint8(140)}
    _close_codes(contrib_model([node], {"a": a, "b": c}, ["y"], inits), {"a": a, "b": c})


@pytest.mark.parametrize("quantized_out", [False, True])
@pytest.mark.parametrize("per_column", [False, True])
def test_qgemm(per_column, quantized_out):
    m, k, n = 5, 32, 12
    a = _codes(np.uint8, (m, k))
    w = _codes(np.int8, (n, k))
    b_scale = (RNG.random(n) * 0.01 + 0.002).astype(np.float32) if per_column else np.float32(0.006)
    b_zp = np.zeros(n, np.int8) if per_column else np.int8(0)
    inits = {"sa": np.float32(0.02), "za": np.uint8(128), "w": w, "sb": b_scale, "zb": b_zp,
             "c": RNG.integers(-2000, 2000, n).astype(np.int32)}
    names = ["a", "sa", "za", "w", "sb", "zb", "c"]
    if quantized_out:
        inits.update({"sy": np.float32(0.3), "zy": np.uint8(128)})
        names += ["sy", "zy"]
    node = helper.make_node("QGemm", names, ["y"], domain=MS, transB=1, alpha=1.0)
    model = contrib_model([node], {"a": a}, ["y"], inits)
    if quantized_out:
        _close_codes(model, {"a": a})
    else:
        check_ort(model, {"a": a}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("per_column,zero_points,bias", [(False, False, False), (True, True, True),
                                                          (True, False, True)])
def test_matmul_integer_to_float(per_column, zero_points, bias):
    a = _codes(np.uint8, (2, 5, 32))
    w = _codes(np.int8, (32, 12))
    inits = {"w": w, "sa": np.float32(0.02),
             "sb": (RNG.random(12) * 0.01 + 0.002).astype(np.float32) if per_column else np.float32(0.004)}
    names = ["a", "w", "sa", "sb"]
    if zero_points or bias:
        inits["za"] = np.uint8(120)
        names.append("za")
    if zero_points:
        inits["zb"] = RNG.integers(-3, 3, 12).astype(np.int8) if per_column else np.int8(2)
    names.append("zb" if zero_points else "")
    if bias:
        inits["bias"] = RNG.standard_normal(12).astype(np.float32)
        names.append("bias")
    while not names[-1]:
        names.pop()
    node = helper.make_node("MatMulIntegerToFloat", names, ["y"], domain=MS)
    check_ort(contrib_model([node], {"a": a}, ["y"], inits), {"a": a}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", ["software", "gpu"])
@pytest.mark.parametrize("weight", [np.int8, np.uint8])
def test_dynamic_quantize_matmul(weight, target):
    a = RNG.standard_normal((3, 7, 32)).astype(np.float32)
    w = _codes(weight, (32, 16))
    inits = {"w": w, "sb": (RNG.random(16) * 0.01 + 0.002).astype(np.float32),
             "zb": np.full(16, 0 if weight == np.int8 else 128, weight), "bias": RNG.standard_normal(16).astype(np.float32)}
    node = helper.make_node("DynamicQuantizeMatMul", ["a", "w", "sb", "zb", "bias"], ["y"], domain=MS)
    check_ort(contrib_model([node], {"a": a}, ["y"], inits), {"a": a}, rtol=1e-5, atol=1e-5, target=target)


@pytest.mark.parametrize("activation,params,z", [("Relu", [], False), ("LeakyRelu", [0.2], True),
                                                 ("Clip", [-0.5, 0.7], False), ("HardSigmoid", [0.3, 0.4], True),
                                                 ("Sigmoid", [], True), (None, [], False)])
def test_fused_conv(activation, params, z):
    x = RNG.standard_normal((1, 4, 9, 9)).astype(np.float32)
    inits = {"w": RNG.standard_normal((6, 4, 3, 3)).astype(np.float32), "b": RNG.standard_normal(6).astype(np.float32)}
    feeds = {"x": x}
    names = ["x", "w", "b"]
    if z:
        feeds["z"] = RNG.standard_normal((1, 6, 9, 9)).astype(np.float32)
        names.append("z")
    attrs = {"activation": activation, "activation_params": params} if activation else {}
    if not params:
        attrs.pop("activation_params", None)
    node = helper.make_node("FusedConv", names, ["y"], domain=MS, pads=[1, 1, 1, 1], **attrs)
    check_ort(contrib_model([node], feeds, ["y"], inits), feeds)
