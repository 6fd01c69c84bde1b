"""graph/passes/unflatten_matmuls.py: view -> 2-D Gemm/MatMul -> view (torch dynamo's nn.Linear and GPT-2's
Conv1D on [b, s, k]) becomes one MatMul over the leading dims, so the bias, activation and residual join its
epilogue. The graphs carry dynamo's symbolic shapes ([batch, sequence, k] and a flat [batch*sequence, k]);
outputs are compared with onnx.reference.ReferenceEvaluator on the original graph."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as h
from fusion_util import after_pass, randn, run_checked

F = onnx.TensorProto.FLOAT
K, N, HEADS = 16, 24, 4


def _decoder_style(lead_out: list, heads: bool = False, trans_b: bool = True) -> onnx.ModelProto:
    """x [b, s, K] (or [b, s, HEADS, K / HEADS]) -> Reshape [m, K] -> Gemm(W, bias) -> Reshape(lead_out + [N])
    -> Gelu -> + r. The reshape targets are built from Shape(x), as exporters write them."""
    x_shape = ["batch", "sequence", HEADS, K // HEADS] if heads else ["batch", "sequence", K]
    w = randn(N, K) if trans_b else randn(K, N)
    nodes = [
        h.make_node("Shape", ["x"], ["xs"]),
        h.make_node("Slice", ["xs", "zero", "two"], ["lead"]),
        h.make_node("Reshape", ["x", "flat_target"], ["flat"]),
        h.make_node("Gemm", ["flat", "w", "bias"], ["mm"], transB=int(trans_b)),
        h.make_node("Gather", ["lead", "order"], ["lead_out"], axis=0),
        h.make_node("Concat", ["lead_out", "n"], ["back_target"], axis=0),
        h.make_node("Reshape", ["mm", "back_target"], ["y"]),
        h.make_node("Gelu", ["y"], ["g"], approximate="tanh"),
        h.make_node("Add", ["g", "r"], ["out"]),
    ]
    order = [0, 1] if lead_out == ["batch", "sequence"] else [1, 0]
    inits = [onnx.numpy_helper.from_array(a, n) for n, a in (
        ("w", w), ("bias", randn(N)), ("zero", np.array([0], np.int64)), ("two", np.array([2], np.int64)),
        ("flat_target", np.array([-1, K], np.int64)), ("order", np.array(order, np.int64)),
        ("n", np.array([N], np.int64)))]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", F, x_shape),
                                  h.make_tensor_value_info("r", F, lead_out + [N])],
                     [h.make_tensor_value_info("out", F, lead_out + [N])], inits,
                     value_info=[h.make_tensor_value_info("flat", F, ["batch*sequence", K]),
                                 h.make_tensor_value_info("mm", F, ["batch*sequence", N]),
                                 h.make_tensor_value_info("y", F, lead_out + [N])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 20)])
    m.ir_version = 9
    return m


def _feeds(heads: bool = False, swapped: bool = False) -> dict:
    x = randn(2, 3, HEADS, K // HEADS) if heads else randn(2, 3, K)
    return {"x": x, "r": randn(3, 2, N) if swapped else randn(2, 3, N)}


def test_linear_on_3d_input_is_one_matmul_with_its_epilogue():
    proto = _decoder_style(["batch", "sequence"])
    ops = after_pass(proto, "unflatten_matmuls")
    assert "Gemm" not in ops and ops.count("Reshape") == 0 and ops.count("MatMul") == 1, ops
    counts = run_checked(proto, _feeds())
    assert counts == {"FusedMatMul": 1}, counts  # bias, Gelu and + r in its epilogue


def test_merged_heads_are_viewed_as_the_hidden_size():
    """The attention's [b, s, heads, d] flattened to [m, heads * d] (GPT-2's c_proj): a view, then the MatMul."""
    proto = _decoder_style(["batch", "sequence"], heads=True, trans_b=False)
    ops = after_pass(proto, "unflatten_matmuls")
    assert "Gemm" not in ops and ops.count("MatMul") == 1 and ops.count("Reshape") == 1, ops
    counts = run_checked(proto, _feeds(heads=True))
    assert {op: n for op, n in counts.items() if n} == {"FusedMatMul": 1}, counts  # the view runs no kernel


def test_reordered_leading_dims_stay_as_written():
    """[b, s, k] flattened, then unflattened as [s, b, n]: not the same leading dims, so no rewrite."""
    proto = _decoder_style(["sequence", "batch"])
    assert "Gemm" in after_pass(proto, "unflatten_matmuls")
    x = randn(3, 3, K)  # square leading dims: the reshape is valid, the result is not a broadcast MatMul
    run_checked(proto, {"x": x, "r": randn(3, 3, N)})
