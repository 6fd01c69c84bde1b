"""sink_transposes: a last-axis-keeping Transpose moves below the row-local region after it (a q/k norm), and
only then; outputs equal onnx's reference evaluator on the original graph, before and after the whole pipeline."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as h
import onnx_ir as ir
from fusion_util import model, randn, run_checked
from onnx.reference import ReferenceEvaluator

from webinfer.graph.passes import PASSES

B, S, H, D = 1, 5, 3, 8


def _rms_region(tail=()):
    """x [b, s, h, d] -> Transpose(0, 2, 1, 3) -> RMS norm over d (weight [d]) [-> tail] -> MatMul by w2 [d, 4]."""
    nodes = [h.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1, 3]),
             h.make_node("Pow", ["xt", "two"], ["sq"]),
             h.make_node("ReduceMean", ["sq", "axes"], ["ms"], keepdims=1),
             h.make_node("Add", ["ms", "eps"], ["mse"]),
             h.make_node("Sqrt", ["mse"], ["rms"]),
             h.make_node("Div", ["xt", "rms"], ["xn"]),
             h.make_node("Mul", ["xn", "w"], ["normed"])]
    last = "normed"
    for i, (op, c) in enumerate(tail):
        nodes.append(h.make_node(op, [last, c], [f"tail{i}"]))
        last = f"tail{i}"
    nodes.append(h.make_node("MatMul", [last, "w2"], ["y"]))
    inits = {"two": np.float32(2), "axes": np.array([-1], np.int64), "eps": np.float32(1e-6),
             "w": randn(D), "w2": randn(D, 4), "scale": np.float32(0.25)}
    return model(nodes, {"x": randn(B, S, H, D)}, ["y"], inits)


def _sunk(proto):
    """(op types after the pass, the number moved, outputs equal to the reference on the original)."""
    feeds = {"x": randn(B, S, H, D)}
    m = ir.serde.deserialize_model(proto)
    moved = PASSES["sink_transposes"](m)
    opt = ir.serde.serialize_model(m)
    onnx.checker.check_model(opt)
    want = ReferenceEvaluator(proto).run(None, feeds)
    got = ReferenceEvaluator(opt).run(None, feeds)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    return [n.op_type for n in m.graph], moved


def test_transpose_moves_below_a_norm_to_its_reader():
    ops, moved = _sunk(_rms_region())
    assert moved == 1
    assert ops.index("Transpose") == ops.index("MatMul") - 1 and ops.count("Transpose") == 1, ops
    counts = run_checked(_rms_region(), {"x": randn(B, S, H, D)})
    assert set(counts) == {"RMSNormalization", "Transpose", "MatMul"}, counts  # the norm: one kernel


def test_a_scalar_tail_stays_after_the_moved_transpose():
    ops, moved = _sunk(_rms_region(tail=[("Mul", "scale")]))
    assert moved == 1
    assert ops[-3:] == ["Transpose", "Mul", "MatMul"], ops


def test_layer_normalization_region_moves():
    nodes = [h.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1, 3]),
             h.make_node("LayerNormalization", ["xt", "g", "b"], ["n"], axis=-1),
             h.make_node("Relu", ["n"], ["r"]),
             h.make_node("MatMul", ["r", "w2"], ["y"])]
    proto = model(nodes, {"x": randn(B, S, H, D)}, ["y"], {"g": randn(D), "b": randn(D), "w2": randn(D, 4)})
    ops, moved = _sunk(proto)
    assert moved == 1 and ops == ["LayerNormalization", "Transpose", "Relu", "MatMul"], ops  # the unary tail stays


def test_refused_regions_keep_the_transpose_in_place():
    # another reader of the transposed tensor outside the region
    nodes = [h.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1, 3]),
             h.make_node("ReduceMean", ["xt", "axes"], ["m"], keepdims=1),
             h.make_node("Sub", ["xt", "m"], ["c"]),
             h.make_node("MatMul", ["c", "w2"], ["y"]),
             h.make_node("MatMul", ["xt", "w2"], ["z"])]
    inits = {"axes": np.array([-1], np.int64), "w2": randn(D, 4)}
    assert _sunk(model(nodes, {"x": randn(B, S, H, D)}, ["y", "z"], inits))[1] == 0
    # a reduction over another axis is not row-local
    nodes = [h.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1, 3]),
             h.make_node("ReduceMean", ["xt", "axes"], ["m"], keepdims=1),
             h.make_node("Sub", ["xt", "m"], ["c"]),
             h.make_node("MatMul", ["c", "w2"], ["y"])]
    inits = {"axes": np.array([2], np.int64), "w2": randn(D, 4)}
    assert _sunk(model(nodes, {"x": randn(B, S, H, D)}, ["y"], inits))[1] == 0
    # elementwise only: nothing to gain
    nodes = [h.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1, 3]),
             h.make_node("Mul", ["xt", "w"], ["c"]),
             h.make_node("MatMul", ["c", "w2"], ["y"])]
    assert _sunk(model(nodes, {"x": randn(B, S, H, D)}, ["y"], {"w": randn(D), "w2": randn(D, 4)}))[1] == 0
    # a constant that varies along another axis than the last
    nodes = [h.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1, 3]),
             h.make_node("Mul", ["xt", "wh"], ["c"]),
             h.make_node("ReduceMean", ["c", "axes"], ["m"], keepdims=1),
             h.make_node("Sub", ["c", "m"], ["e"]),
             h.make_node("MatMul", ["e", "w2"], ["y"])]
    inits = {"axes": np.array([-1], np.int64), "wh": randn(H, 1, 1), "w2": randn(D, 4)}
    ops, moved = _sunk(model(nodes, {"x": randn(B, S, H, D)}, ["y"], inits))
    assert moved == 0 and ops[0] == "Transpose", ops
