"""Every graph pass on a model whose If branches capture outer values and return values the passes would
rewrite: a branch's Identity of a value that is already another graph's output (onnx-ir's identity
elimination made it that graph's output too: "already an output of a different graph", a Silero-VAD
export's failure), intermediates of fusable chains (MatMul+Add, elementwise, transpose pairs) read
inside branches, a branch nested in a branch, and a Loop body returning a captured value as its scan output. The optimized model equals onnxruntime on the original,
and webinfer's build of it equals onnxruntime with either branch taken."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as h
import onnx_ir as ir
import onnxruntime as ort
import pytest

from webinfer.backend import WebinferRep
from webinfer.graph.passes import PASSES

F = onnx.TensorProto.FLOAT
RNG = np.random.default_rng(7)


def _branch(name, nodes, outputs):
    return h.make_graph(nodes, name, [], [h.make_tensor_value_info(o, F, [3, 6]) for o in outputs])


def subgraph_model() -> onnx.ModelProto:
    w = RNG.standard_normal((6, 6)).astype(np.float32)
    bias = RNG.standard_normal(6).astype(np.float32)
    inner = h.make_node("If", ["c2"], ["io"], then_branch=_branch("inner_then", [h.make_node("Identity", ["v"], ["it"])], ["it"]),
                        else_branch=_branch("inner_else", [h.make_node("Neg", ["relu"], ["ie"])], ["ie"]))
    then = _branch("then", [
        h.make_node("Neg", ["mm"], ["v"]),                      # mm: a MatMul the main graph fuses with its Add
        h.make_node("Identity", ["v"], ["t_out"]),             # eliminated: v becomes this branch's output ...
        inner,                                                  # ... and the inner branch's Identity(v) stays
        h.make_node("Add", ["io", "relu"], ["t_io"]),
    ], ["t_out", "t_io"])
    other = _branch("else", [
        h.make_node("Identity", ["y"], ["e_out"]),             # y is the main graph's output
        h.make_node("Mul", ["relu", "back"], ["e_sq"]),
    ], ["e_out", "e_sq"])
    body = h.make_graph([
        h.make_node("Identity", ["cond_in"], ["cond_out"]),   # a loop body's own input: stays
        h.make_node("Add", ["acc_in", "relu"], ["acc_out"]),
        h.make_node("Identity", ["y"], ["scan"]),             # a captured main-graph output as a scan output
    ], "body", [h.make_tensor_value_info("i", onnx.TensorProto.INT64, []),
                h.make_tensor_value_info("cond_in", onnx.TensorProto.BOOL, []),
                h.make_tensor_value_info("acc_in", F, [3, 6])],
        [h.make_tensor_value_info("cond_out", onnx.TensorProto.BOOL, []), h.make_tensor_value_info("acc_out", F, [3, 6]),
         h.make_tensor_value_info("scan", F, [3, 6])])
    nodes = [
        h.make_node("MatMul", ["x", "w"], ["mm"]),
        h.make_node("Add", ["mm", "bias"], ["y0"]),
        h.make_node("Relu", ["y0"], ["relu"]),                  # an elementwise chain whose middle a branch reads
        h.make_node("Mul", ["relu", "two"], ["y"]),
        h.make_node("Transpose", ["x"], ["xt"], perm=[1, 0]),
        h.make_node("Transpose", ["xt"], ["back"], perm=[1, 0]),  # a pair that cancels
        h.make_node("If", ["c"], ["o1", "o2"], then_branch=then, else_branch=other),
        h.make_node("Loop", ["three", "", "x"], ["acc", "scans"], body=body),
    ]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", F, [3, 6]), h.make_tensor_value_info("c", onnx.TensorProto.BOOL, []),
                                  h.make_tensor_value_info("c2", onnx.TensorProto.BOOL, [])],
                     [h.make_tensor_value_info(n, F, [3, 6]) for n in ("y", "o1", "o2", "acc")]
                     + [h.make_tensor_value_info("scans", F, [3, 3, 6])],
                     [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(bias, "bias"),
                      onnx.numpy_helper.from_array(np.float32(2.0), "two"),
                      onnx.numpy_helper.from_array(np.int64(3), "three")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def _feeds(c: bool, c2: bool) -> dict:
    return {"x": RNG.standard_normal((3, 6)).astype(np.float32), "c": np.array(c), "c2": np.array(c2)}


def _ort(proto, feeds):
    """onnxruntime as it is, without its own graph rewrites in the way."""
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.parametrize("name", list(PASSES))
def test_each_pass_keeps_subgraphs_valid(name):
    proto = subgraph_model()
    m = ir.serde.deserialize_model(proto)
    PASSES[name](m)
    opt = ir.serde.serialize_model(m)
    onnx.checker.check_model(opt)
    for c, c2 in ((True, True), (True, False), (False, False)):
        feeds = _feeds(c, c2)
        for want, got in zip(_ort(proto, feeds), _ort(opt, feeds), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_all_passes_then_build_equal_onnxruntime():
    proto = subgraph_model()
    rep = WebinferRep(proto)
    for c, c2 in ((True, True), (True, False), (False, True)):
        feeds = _feeds(c, c2)
        for want, got in zip(_ort(proto, feeds), rep.run(feeds), strict=True):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
