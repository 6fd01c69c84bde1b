"""``build(..., save_optimized=path)`` writes the fused graph as ONNX: webinfer's domain is in
opset_import, onnx's checker accepts it (webinfer as a custom domain), and building the saved model
again gives the original model's outputs (ReferenceEvaluator on the unfused graph)."""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnx.helper as h
from fusion_util import model, randn
from onnx.reference import ReferenceEvaluator

from webinfer.backend import WebinferRep
from webinfer.build import build


def _mixed_model():
    nodes = [h.make_node("Conv", ["x", "k", "kb"], ["c"], pads=[1, 1, 1, 1]), h.make_node("HardSwish", ["c"], ["hs"]),
             h.make_node("Flatten", ["hs"], ["f"]), h.make_node("MatMul", ["f", "w"], ["m"]),
             h.make_node("Add", ["m", "b"], ["mb"]), h.make_node("Div", ["mb", "r2"], ["d"]),
             h.make_node("Erf", ["d"], ["e"]), h.make_node("Add", ["e", "one"], ["e1"]),
             h.make_node("Mul", ["mb", "e1"], ["g"]), h.make_node("Mul", ["g", "half"], ["gelu"]),
             h.make_node("Pow", ["gelu", "two"], ["p"]), h.make_node("ReduceMean", ["p", "axes"], ["ms"]),
             h.make_node("Add", ["ms", "eps"], ["mse"]), h.make_node("Sqrt", ["mse"], ["rt"]),
             h.make_node("Reciprocal", ["rt"], ["inv"]), h.make_node("Mul", ["gelu", "inv"], ["out"])]
    inits = {"k": randn(4, 2, 3, 3), "kb": randn(4), "w": randn(4 * 5 * 5, 16), "b": randn(16),
             "r2": np.float32(math.sqrt(2)), "one": np.float32(1), "half": np.float32(0.5), "two": np.float32(2),
             "axes": np.array([-1], np.int64), "eps": np.float32(1e-6)}
    return model(nodes, {"x": randn(3, 2, 5, 5)}, ["out"], inits)


def test_saved_optimized_model_checks_and_runs(tmp_path):
    proto = _mixed_model()
    feeds = {"x": randn(3, 2, 5, 5)}
    path = str(tmp_path / "model.opt.onnx")
    build(proto, str(tmp_path / "a.wi"), save_optimized=path)
    saved = onnx.load(path)
    onnx.checker.check_model(saved)  # webinfer's ops are a custom domain: accepted, not schema-checked
    assert {o.domain: o.version for o in saved.opset_import}.get("webinfer") == 1
    ops = sorted(n.op_type for n in saved.graph.node if n.domain == "webinfer")
    assert ops == ["FusedConv", "FusedGemm", "RMSNormalization"]  # MatMul + Add became Gemm first
    want = ReferenceEvaluator(proto).run(None, feeds)[0]
    got = WebinferRep(saved).run(feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
