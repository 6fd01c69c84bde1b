"""Sequences and optionals of known structure, against onnx.reference (through webinfer.backend, which
feeds a sequence's elements as flat tensors and returns sequence outputs as lists)."""

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from webinfer.backend import WebinferRep
from webinfer.build import build
from webinfer.errors import WebinferError

rng = np.random.default_rng(7)
F, I64 = TensorProto.FLOAT, TensorProto.INT64


def model(nodes, inputs, outputs, opset=21):
    return helper.make_model(helper.make_graph(nodes, "seq", inputs, outputs),
                             opset_imports=[helper.make_opsetid("", opset)])


def seq_vi(name, elem=F, shape=None):
    return helper.make_tensor_sequence_value_info(name, elem, shape)


def check(m, feeds):
    want = ReferenceEvaluator(m).run(None, feeds)
    rep = WebinferRep(m)
    got = rep.run(feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, list):
            assert isinstance(g, list) and len(g) == len(w)
            for a, b in zip(g, w):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
                assert a.dtype == b.dtype
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    return rep


def test_split_erase_insert_concat():
    """SplitToSequence -> SequenceErase/Insert at negative positions -> ConcatFromSequence (new axis and not)."""
    nodes = [helper.make_node("SplitToSequence", ["x", "split"], ["s"], axis=1),
             helper.make_node("SequenceErase", ["s", "minus2"], ["s2"]),
             helper.make_node("SequenceInsert", ["s2", "t", "one"], ["s3"]),
             helper.make_node("ConcatFromSequence", ["s3"], ["cat"], axis=1),
             helper.make_node("SplitToSequence", ["cat"], ["rows"], axis=0, keepdims=0),
             helper.make_node("ConcatFromSequence", ["rows"], ["stacked"], axis=-1, new_axis=1),
             helper.make_node("SequenceLength", ["s3"], ["n"])]
    m = model(nodes, [helper.make_tensor_value_info("x", F, [3, 7]), helper.make_tensor_value_info("t", F, [3, 2])],
              [helper.make_tensor_value_info(o, F, None) for o in ("cat", "stacked")]
              + [helper.make_tensor_value_info("n", I64, None), seq_vi("s3")])
    m.graph.initializer.extend([helper.make_tensor("split", I64, [3], [2, 4, 1]),
                                helper.make_tensor("minus2", I64, [], [-2]),
                                helper.make_tensor("one", I64, [], [1])])
    rep = check(m, {"x": rng.standard_normal((3, 7)).astype(np.float32),
                    "t": rng.standard_normal((3, 2)).astype(np.float32)})
    assert any(p["op"] == "ConcatFromSequence" and p["where"] == "gpu" for p in rep.placement)


def test_sequence_map_and_optional_inputs():
    """SequenceMap over a fed sequence with an extra tensor; an optional input present or empty."""
    body = helper.make_graph([helper.make_node("Mul", ["e", "w"], ["p"]), helper.make_node("ReduceSum", ["p"], ["r"])],
                             "body", [helper.make_tensor_value_info("e", F, None), helper.make_tensor_value_info("w", F, None)],
                             [helper.make_tensor_value_info("r", F, None)])
    nodes = [helper.make_node("SequenceMap", ["xs", "w"], ["sums"], body=body),
             helper.make_node("OptionalHasElement", ["o"], ["has"])]
    opt = helper.make_value_info("o", helper.make_optional_type_proto(helper.make_tensor_type_proto(F, [2])))
    m = model(nodes, [seq_vi("xs"), helper.make_tensor_value_info("w", F, [4]), opt],
              [seq_vi("sums"), helper.make_tensor_value_info("has", TensorProto.BOOL, [])])
    xs = [rng.standard_normal((k, 4)).astype(np.float32) for k in (1, 3, 2)]
    w = rng.standard_normal(4).astype(np.float32)
    check(m, {"xs": xs, "w": w, "o": np.ones(2, np.float32)})
    check(m, {"xs": xs[:2], "w": w, "o": None})


def test_loop_carrying_a_sequence_is_unrolled():
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=F), helper.make_node("Mul", ["x", "fi"], ["xi"]),
         helper.make_node("SequenceInsert", ["acc", "xi"], ["acc2"]), helper.make_node("Identity", ["c"], ["c2"]),
         helper.make_node("Identity", ["xi"], ["scan"])],
        "body", [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                 seq_vi("acc")], [helper.make_tensor_value_info("c2", TensorProto.BOOL, []), seq_vi("acc2"),
                                  helper.make_tensor_value_info("scan", F, None)])
    nodes = [helper.make_node("SequenceEmpty", [], ["empty"], dtype=F),
             helper.make_node("Loop", ["three", "true", "empty"], ["seq", "scans"], body=body)]
    m = model(nodes, [helper.make_tensor_value_info("x", F, [4])], [seq_vi("seq"), helper.make_tensor_value_info("scans", F, None)])
    m.graph.initializer.extend([helper.make_tensor("three", I64, [], [3]),
                                helper.make_tensor("true", TensorProto.BOOL, [], [True])])
    check(m, {"x": rng.standard_normal(4).astype(np.float32)})


def test_sequence_input_without_structure_is_one_clear_error(tmp_path):
    m = model([helper.make_node("SequenceLength", ["xs"], ["n"])], [seq_vi("xs")],
              [helper.make_tensor_value_info("n", I64, [])])
    with pytest.raises(WebinferError, match="structure must be given at build time"):
        build(m, str(tmp_path / "a"))
