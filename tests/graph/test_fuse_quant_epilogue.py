"""Epilogues on the quantized matmul: MatMul -> (quantize) MatMulQ, then a residual Add and a Sigmoid are
computed inside its GEMV (one row) and GEMM (many rows) kernels. Compared with numpy on the fp32 weights,
at int8's tolerance; an epilogue that is dropped or misapplied is far outside it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import webinfer


@pytest.mark.parametrize("target", ["software", "gpu", "gpu-dp4a"])
@pytest.mark.parametrize("rows", [1, 5])
def test_residual_and_activation_fused_into_quantized_matmul(tmp_path, rows, target):
    rng = np.random.default_rng(rows)
    k, n = 64, 48
    w = rng.normal(size=(k, n)).astype(np.float32) * 0.2
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "r"], ["s"]),
             helper.make_node("Sigmoid", ["s"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "rows", k]),
                                       helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, "rows", n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "w")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    out = tmp_path / "q.wi"
    # rows fixed: the one-row (GEMV) or the many-row (GEMM) kernel
    webinfer.build(model, str(out), quantize="int8", target=target, dims={"rows": rows})
    labels = [s["label"] for s in json.loads((out / "manifest.json").read_text())["programs"][0]["steps"]]
    steps = 2 if target == "gpu-dp4a" and rows == 1 else 1  # the epilogue inside (dp4a: x quantized first)
    assert [lb.split(":")[1] for lb in labels] == ["FusedMatMulQ"] * steps
    x = rng.normal(size=(1, rows, k)).astype(np.float32)
    r = rng.normal(size=(1, rows, n)).astype(np.float32)
    want = 1 / (1 + np.exp(-(x @ w + r)))
    got = webinfer.InferenceSession(str(out)).run(None, {"x": x, "r": r})[0]
    # int8: ~0.02 before the sigmoid (with int8 activations too, ~0.03); a lost Add is ~0.2
    np.testing.assert_allclose(got, want, atol=1.5e-2 if target != "gpu-dp4a" else 3e-2)
