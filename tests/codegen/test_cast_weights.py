"""Weights stored as int8 / float16 initializers and read through ``Cast`` (then scaled), the way some speech
encoders ship them, with sinusoidal positions computed in the graph (Sin/Cos over Range): against onnxruntime.
int8 weights (``Cast [- zero point] [* scale]`` per tensor or per output column) stay one byte per value in
the artifact, packed into the quantized matmul's words (graph/qdq_weights.py)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from contrib.ort_ref import ort_run
from onnx import TensorProto as T
from onnx import helper
from onnx import numpy_helper as nh
from oprefs import TARGETS, tolerance

import webinfer
from webinfer.backend import WebinferRep

D = 128


def _encoder(rng, weight: str, scale: str) -> onnx.ModelProto:
    inits, nodes = [], []

    def init(name, a):
        inits.append(nh.from_array(a, name))
        return name

    def node(op, ins, **kw):
        out = f"t{len(nodes)}"
        nodes.append(helper.make_node(op, ins, [out], **kw))
        return out

    # sinusoidal positions over the (symbolic) sequence length
    length = node("Gather", [node("Shape", ["x"]), init("one", np.array(1, np.int64))], axis=0)
    pos = node("Cast", [node("Range", [init("zero", np.array(0, np.int64)), length, "one"])], to=T.FLOAT)
    idx = node("Cast", [node("Range", ["zero", init("half", np.array(D // 2, np.int64)), "one"])], to=T.FLOAT)
    inv = node("Exp", [node("Mul", [idx, init("rate", np.array(-np.log(10000.0) / (D // 2), np.float32))])])
    angle = node("Mul", [node("Unsqueeze", [pos, init("ax", np.array([1], np.int64))]), inv])
    h = node("Add", ["x", node("Concat", [node("Sin", [angle]), node("Cos", [angle])], axis=-1)])

    def projection(h, i):
        if weight == "float16":
            w = init(f"w{i}", (rng.standard_normal((D, D)) * 0.1).astype(np.float16))
            return node("MatMul", [h, node("Cast", [w], to=T.FLOAT)])
        codes = rng.integers(-127, 128, (D, D)) if weight == "int8" else rng.integers(0, 256, (D, D))
        w = node("Cast", [init(f"w{i}", codes.astype(weight))], to=T.FLOAT)
        if weight == "uint8":
            w = node("Sub", [w, init(f"z{i}", np.array(128.0, np.float32))])
        s = rng.random(D) * 0.002 + 0.0005 if scale == "column" else np.array(0.001)
        s = init(f"s{i}", s.astype(np.float32))
        if scale == "after":  # the scale applied to the product instead: x @ Cast(w) * s
            return node("Mul", [node("MatMul", [h, w]), s])
        return node("MatMul", [h, node("Mul", [w, s])])

    h = node("Relu", [projection(h, 0)])
    nodes.append(helper.make_node("Add", [projection(h, 1), "x"], ["y"]))
    g = helper.make_graph(nodes, "enc", [helper.make_tensor_value_info("x", T.FLOAT, [1, "frames", D])],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


CASES = [("int8", "column"), ("int8", "tensor"), ("int8", "after"), ("uint8", "column"), ("float16", "")]


@pytest.mark.parametrize("target", ["software", "gpu"])
@pytest.mark.parametrize("weight,scale", CASES)
def test_cast_weights_equal_onnxruntime(weight, scale, target):
    rng = np.random.default_rng(11)
    model = _encoder(rng, weight, scale)
    rep = WebinferRep(model, target=target)
    for frames in (1, 37, 200):  # one build, symbolic frames (positions up to 200 radians)
        feeds = {"x": rng.standard_normal((1, frames, D)).astype(np.float32)}
        want = ort_run(model, feeds)[0]
        got = rep.run(feeds)[0]
        assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()


@pytest.mark.parametrize("scale", ["column", "tensor", "after"])
def test_int8_weights_stay_packed(scale, tmp_path):
    model = _encoder(np.random.default_rng(2), "int8", scale)
    manifest = webinfer.build(model, str(tmp_path / "a"))
    stored = sum(s["bytes"] for s in manifest["shards"])
    codes = 2 * D * D  # the two int8 weights, a byte a value
    assert codes <= stored < codes + 2 * D * D // 4  # + block parameters, far below an f32 copy (4 bytes a value)


def _half_matmul(rows, k, n, gemm: bool, rng) -> tuple[onnx.ModelProto, dict]:
    w = (rng.standard_normal((n, k) if gemm else (k, n)) * 0.2).astype(np.float16)
    inits = [nh.from_array(w, "w")]
    nodes = [helper.make_node("Cast", ["w"], ["wf"], to=T.FLOAT)]
    if gemm:
        inits.append(nh.from_array(rng.standard_normal(n).astype(np.float32), "c"))
        nodes.append(helper.make_node("Gemm", ["x", "wf", "c"], ["y"], transB=1, beta=0.5))
    else:
        nodes.append(helper.make_node("MatMul", ["x", "wf"], ["y"]))
    x_shape = [rows, k] if gemm else [1, rows, k]
    g = helper.make_graph(nodes, "half", [helper.make_tensor_value_info("x", T.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return model, {"x": rng.standard_normal(x_shape).astype(np.float32)}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("rows,k,n,gemm", [(1, 64, 40, False), (1, 37, 9, False), (6, 64, 40, False),
                                           (5, 22, 33, False), (4, 48, 12, True), (1, 30, 8, True)])
def test_float16_weights(rows, k, n, gemm, target):
    """float16 weights through Cast: the kernels read the model's halves (decode GEMV and prefill GEMM)."""
    model, feeds = _half_matmul(rows, k, n, gemm, np.random.default_rng(rows * k + n))
    want = ort_run(model, feeds)[0]
    got = WebinferRep(model, target=target).run(feeds)[0]
    rtol, atol = tolerance(target, 1e-4, 1e-5)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * (1 + np.abs(want).max()))


def test_float16_weights_stay_packed(tmp_path):
    model = _encoder(np.random.default_rng(2), "float16", "")
    manifest = webinfer.build(model, str(tmp_path / "a"))
    stored = sum(s["bytes"] for s in manifest["shards"])
    assert 2 * D * D * 2 <= stored < 2 * D * D * 2 + 4096  # two bytes a value, not an f32 copy


def _forms():
    """(name, nodes, initializers, narrow bytes of the weight): how exporters spell a narrow weight."""
    rng = np.random.default_rng(9)
    k, n = 96, 80
    w8 = rng.integers(-128, 128, (n, k)).astype(np.int8)
    u8 = rng.integers(0, 256, (k, n)).astype(np.uint8)
    h = (rng.standard_normal((n, k)) * 0.1).astype(np.float16)
    mk = helper.make_node
    cast = mk("Cast", ["w"], ["wf"], to=T.FLOAT)
    return [
        ("gemm-transB-per-row", [cast, mk("Mul", ["wf", "s"], ["ws"]), mk("Gemm", ["x", "ws", "b"], ["y"], transB=1)],
         {"w": w8, "s": (rng.random((n, 1)) * 0.01).astype(np.float32), "b": rng.standard_normal(n).astype(np.float32)},
         n * k),
        ("transposed", [cast, mk("Mul", ["s", "wf"], ["ws"]), mk("Transpose", ["ws"], ["wt"], perm=[1, 0]),
                        mk("MatMul", ["x", "wt"], ["y"])], {"w": w8, "s": (rng.random((n, 1)) * 0.01).astype(np.float32)},
         n * k),
        ("per-K-scale", [cast, mk("Mul", ["wf", "s"], ["ws"]), mk("MatMul", ["x", "ws"], ["y"])],
         {"w": w8.T.copy(), "s": (rng.random((k, 1)) * 0.01).astype(np.float32)}, n * k),  # dequantized per run
        ("uint8-zero-per-column", [cast, mk("Sub", ["wf", "z"], ["wz"]), mk("Mul", ["wz", "s"], ["ws"]),
                                   mk("MatMul", ["x", "ws"], ["y"])],
         {"w": u8, "z": rng.integers(100, 150, n).astype(np.float32), "s": (rng.random(n) * 0.01).astype(np.float32)},
         n * k),
        ("f16-transposed", [cast, mk("Transpose", ["wf"], ["wt"]), mk("MatMul", ["x", "wt"], ["y"])], {"w": h},
         2 * n * k),
    ]


@pytest.mark.parametrize("form", range(len(_forms())), ids=[f[0] for f in _forms()])
def test_weight_forms(form, tmp_path):
    _, nodes, inits, narrow = _forms()[form]
    g = helper.make_graph(nodes, "w", [helper.make_tensor_value_info("x", T.FLOAT, [3, 96])],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)],
                          [nh.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    feeds = {"x": np.random.default_rng(form).standard_normal((3, 96)).astype(np.float32)}
    want = ort_run(model, feeds)[0]
    got = WebinferRep(model).run(feeds)[0]
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    stored = sum(s["bytes"] for s in webinfer.build(model, str(tmp_path / "a"))["shards"])
    assert narrow <= stored <= narrow + 4096  # the weight at its own width (+ scales, bias), never an f32 copy
