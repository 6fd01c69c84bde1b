"""Paddle's ``for i in range(n): ... x[i:min(n, i + 1)] ...`` as paddle2onnx writes it (SLANet's table decoder): a
Loop that carries the counter itself (0, then +1.0 through float Casts), slices at it, stops on a condition,
carries a value first assigned in the body (a placeholder scalar, then a row), and an If whose branches give
``True`` and a one-element [1] tensor; after the loop the final counter bounds a slice. Each output equals
onnxruntime's, for several lengths (the loop's trip count, 16, is above them: slice lengths go negative at the
bound, where buffers are sized)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

from webinfer.backend import WebinferRep
from webinfer.graph.importer import import_model
from webinfer.graph.passes import loop_counters

F, I64, B = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64, onnx.TensorProto.BOOL


def const(name, value, dtype=np.int64):
    return helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(np.array(value, dtype)))


def body_graph():
    then = helper.make_graph([const("t", True, np.bool_)], "then", [], [helper.make_tensor_value_info("t", B, [])])
    other = helper.make_graph([const("big", [1000]), helper.make_node("Greater", ["c", "big"], ["f"])], "else", [],
                              [helper.make_tensor_value_info("f", B, [1])])
    nodes = [
        const("one_f", 1.0, np.float32), const("b_zero", [0]), const("hundred", 100),
        helper.make_node("Cast", ["c"], ["cf"], to=F),
        helper.make_node("Add", ["cf", "one_f"], ["cf1"]),
        helper.make_node("Cast", ["cf1"], ["c1"], to=I64),                       # c + 1, through floats
        helper.make_node("Shape", ["x"], ["xs"]),
        helper.make_node("Slice", ["xs", "b_zero", "c1_one"], ["n"]),              # [n]
        const("c1_one", [1]),
        helper.make_node("Min", ["n", "c1"], ["end"]),
        helper.make_node("Slice", ["x", "c", "end", "b_zero"], ["row"]),           # x[c:min(n, c + 1)]
        helper.make_node("ReduceSum", ["row", "b_zero"], ["row1"], keepdims=1),  # [1, 4]
        helper.make_node("Add", ["acc", "row1"], ["acc2"]),
        helper.make_node("Greater", ["i", "hundred"], ["late"]),
        helper.make_node("If", ["late"], ["flag"], then_branch=then, else_branch=other),  # [] or [1]
        helper.make_node("Not", ["flag"], ["b_go"]),
        helper.make_node("Less", ["c1", "n"], ["more"]),
        helper.make_node("And", ["more", "b_go"], ["cond_out"]),
        helper.make_node("Identity", ["row"], ["last_out"]),
        helper.make_node("Identity", ["c1"], ["c_out"]),
    ]
    nodes.insert(7, nodes.pop(8))  # c1_one before its Slice
    return helper.make_graph(
        nodes, "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond", B, []),
         helper.make_tensor_value_info("c", I64, [1]), helper.make_tensor_value_info("acc", F, [1, 4]),
         helper.make_tensor_value_info("last", F, [])],
        [helper.make_tensor_value_info("cond_out", B, [1]), helper.make_tensor_value_info("c_out", I64, [1]),
         helper.make_tensor_value_info("acc2", F, [1, 4]), helper.make_tensor_value_info("last_out", F, None)])


def model():
    nodes = [
        const("trip", 16), const("go", True, np.bool_), const("c0", [0]),
        helper.make_node("Constant", [], ["acc0"], value=onnx.numpy_helper.from_array(np.zeros((1, 4), np.float32))),
        const("last0", 0.0, np.float32), const("zero", [0]), const("minus_f", -1.0, np.float32),
        helper.make_node("Loop", ["trip", "go", "c0", "acc0", "last0"], ["c_end", "acc", "last"], body=body_graph()),
        helper.make_node("Cast", ["c_end"], ["ce_f"], to=F),
        helper.make_node("Add", ["ce_f", "minus_f"], ["ce_f1"]),
        helper.make_node("Cast", ["ce_f1"], ["stop"], to=I64),                   # the final counter - 1
        const("one", [1]),
        helper.make_node("Slice", ["table", "zero", "stop", "one"], ["head"]),  # table[:, :stop]
    ]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, ["n", 4]),
                                       helper.make_tensor_value_info("table", F, [1, 32])],
                          [helper.make_tensor_value_info("acc", F, [1, 4]), helper.make_tensor_value_info("last", F, None),
                           helper.make_tensor_value_info("head", F, None), helper.make_tensor_value_info("c_end", I64, [1])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def test_the_counter_becomes_an_expression_of_the_iteration():
    ir_model = import_model(model())
    assert loop_counters.run(ir_model) > 0
    loop = next(n for n in ir_model.graph if n.op_type == "Loop")
    assert loop.metadata_props[loop_counters.COUNTERS] == '{"0": [0, 1]}'


@pytest.mark.parametrize("n", [3, 5, 9])
def test_paddle_counter_loop_matches_onnxruntime(n):
    m = model()
    rng = np.random.default_rng(n)
    feeds = {"x": rng.standard_normal((n, 4)).astype(np.float32), "table": rng.standard_normal((1, 32)).astype(np.float32)}
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = WebinferRep(m).run(feeds)
    for g, w in zip(got, want):
        assert np.asarray(g).size == w.size
        np.testing.assert_allclose(np.asarray(g).reshape(w.shape), w, rtol=1e-6, atol=1e-6)


def test_a_reshaped_unread_carry_after_no_iteration_is_refused_not_wrong():
    """A carried value the body never reads takes the body's shape ([1] -> [3]); after no iteration onnxruntime
    gives the initial [1] value, which no buffer of the build holds: such a run is one clear error, never zeros."""
    from webinfer.errors import WebinferError

    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), const("two", 2.0, np.float32),
         helper.make_node("Mul", ["a_in", "two"], ["a_out"]), helper.make_node("Add", ["a_in", "two"], ["b_out"])],
        "body", [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", B, []),
                 helper.make_tensor_value_info("a_in", F, [3]), helper.make_tensor_value_info("b_in", F, ["n"])],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("a_out", F, [3]),
         helper.make_tensor_value_info("b_out", F, [3])])
    graph = helper.make_graph(
        [const("go", True, np.bool_), helper.make_node("Loop", ["m", "go", "a0", "b0"], ["a", "b"], body=body)], "g",
        [helper.make_tensor_value_info("m", I64, []), helper.make_tensor_value_info("a0", F, [3]),
         helper.make_tensor_value_info("b0", F, [1])],
        [helper.make_tensor_value_info("a", F, [3]), helper.make_tensor_value_info("b", F, ["k"])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    rep, ref = WebinferRep(proto), ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {"a0": np.array([1, 2, 3], np.float32), "b0": np.array([7], np.float32)}
    for m in (1, 3):
        f = {"m": np.array(m, np.int64), **feeds}
        for got, want in zip(rep.run(f), ref.run(None, f)):
            np.testing.assert_array_equal(got, want)
    with pytest.raises(WebinferError, match="must run at least once"):
        rep.run({"m": np.array(0, np.int64), **feeds})
