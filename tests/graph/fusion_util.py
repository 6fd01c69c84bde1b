"""Helpers for the fusion-pass tests: build a small ONNX model, run it through webinfer (whole pipeline)
and through onnx.reference.ReferenceEvaluator on the ORIGINAL, unfused graph, and report what ran."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as h
import onnx_ir as ir
from oprefs import check_model

from webinfer.graph.passes import PASSES

F = onnx.TensorProto.FLOAT
RNG = np.random.default_rng(4)


def model(nodes, inputs: dict, outputs: list[str], inits: dict | None = None, opset: int = 18) -> onnx.ModelProto:
    """inputs: name -> array (declares dtype and shape); shapes are inferred, as the pipeline's folding does."""
    g = h.make_graph(nodes, "g",
                     [h.make_tensor_value_info(n, h.np_dtype_to_tensor_dtype(v.dtype), v.shape) for n, v in inputs.items()],
                     [h.make_empty_tensor_value_info(o) for o in outputs],
                     [onnx.numpy_helper.from_array(np.asarray(v), n) for n, v in (inits or {}).items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 9
    return onnx.shape_inference.infer_shapes(m)


def run_checked(proto: onnx.ModelProto, feeds: dict, rtol: float = 1e-4, atol: float = 1e-5,
                target: str = "software") -> dict:
    """Outputs of webinfer equal the reference's on the original graph; returns {op: dispatches} of the run."""
    _, _, placement, _ = check_model(proto, feeds, rtol, atol, target=target)
    counts: dict = {}
    for p in placement:
        counts[p["op"]] = counts.get(p["op"], 0) + p["dispatches"]
    return counts


def after_pass(proto: onnx.ModelProto, *names: str) -> list[str]:
    """The op types left after running the named passes (and nothing else) on the model."""
    m = ir.serde.deserialize_model(proto)
    for n in names:
        PASSES[n](m)
    return [n.op_type for n in m.graph]


def randn(*shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)
