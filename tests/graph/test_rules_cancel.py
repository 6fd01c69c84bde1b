"""The pair-cancelling rules of cancel.py, each alone: it fires on a tiny graph and the result computes what
onnx.reference computes on the original; a pair its condition refuses stays as it was."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as h
from fusion_util import model, randn
from rule_util import check_rule

from webinfer.graph.passes.cancel import (
    CAST_CAST,
    CAST_NOOP,
    RESHAPE_RESHAPE,
    TRANSPOSE_TRANSPOSE,
    UNSQUEEZE_SQUEEZE,
)

F, I32, D = onnx.TensorProto.FLOAT, onnx.TensorProto.INT32, onnx.TensorProto.DOUBLE


def test_cast_noop_fires_and_a_real_cast_stays():
    feeds = {"x": randn(3, 4) * 5}
    p = model([h.make_node("Cast", ["x"], ["c"], to=F), h.make_node("Relu", ["c"], ["out"])], feeds, ["out"])
    assert check_rule(p, CAST_NOOP, feeds, fires=True) == ["Relu"]
    p = model([h.make_node("Cast", ["x"], ["c"], to=I32), h.make_node("Neg", ["c"], ["out"])], feeds, ["out"])
    assert check_rule(p, CAST_NOOP, feeds, fires=False) == ["Cast", "Neg"]


def _casts(mid):
    feeds = {"x": randn(3, 4) * 5}
    nodes = [h.make_node("Cast", ["x"], ["a"], to=mid), h.make_node("Cast", ["a"], ["b"], to=F),
             h.make_node("Relu", ["b"], ["out"])]
    return model(nodes, feeds, ["out"]), feeds


def test_cast_round_trip_through_a_wider_type_cancels():
    p, feeds = _casts(D)
    assert check_rule(p, CAST_CAST, feeds, fires=True) == ["Relu"]


def test_cast_cast_condition_refuses_a_lossy_first_cast():
    p, feeds = _casts(I32)
    assert check_rule(p, CAST_CAST, feeds, fires=False) == ["Cast", "Cast", "Relu"]


def test_reshape_pair_merges_and_a_computed_shape_stays():
    feeds = {"x": randn(2, 3, 4)}
    nodes = [h.make_node("Reshape", ["x", "s1"], ["a"]), h.make_node("Reshape", ["a", "s2"], ["b"]),
             h.make_node("Relu", ["b"], ["out"])]
    inits = {"s1": np.array([6, 4], np.int64), "s2": np.array([0, 2, 2], np.int64)}
    p = model(nodes, feeds, ["out"], inits)
    assert check_rule(p, RESHAPE_RESHAPE, feeds, fires=True) == ["Reshape", "Relu"]
    feeds = {**feeds, "s2": np.array([4, 6], np.int64)}
    p = model(nodes, feeds, ["out"], {"s1": inits["s1"]})
    assert check_rule(p, RESHAPE_RESHAPE, feeds, fires=False) == ["Reshape", "Reshape", "Relu"]


def _transposes(perms):
    feeds = {"x": randn(2, 3, 4)}
    nodes = [h.make_node("Transpose", ["x"], ["a"], **({"perm": perms[0]} if perms else {})),
             h.make_node("Transpose", ["a"], ["b"], **({"perm": perms[1]} if perms else {})),
             h.make_node("Relu", ["b"], ["out"])]
    return model(nodes, feeds, ["out"]), feeds


def test_transposes_compose():
    p, feeds = _transposes(([1, 0, 2], [0, 2, 1]))
    assert check_rule(p, TRANSPOSE_TRANSPOSE, feeds, fires=True) == ["Transpose", "Relu"]


def test_transpose_pair_condition_refuses_default_perms_of_an_unknown_rank():
    p, feeds = _transposes(None)
    p.graph.input[0].type.tensor_type.ClearField("shape")
    del p.graph.value_info[:]
    assert check_rule(p, TRANSPOSE_TRANSPOSE, feeds, fires=False) == ["Transpose", "Transpose", "Relu"]


def _unsqueeze_squeeze(removed):
    feeds = {"x": randn(1, 4)}
    nodes = [h.make_node("Unsqueeze", ["x", "a1"], ["u"]), h.make_node("Squeeze", ["u", "a2"], ["s"]),
             h.make_node("Relu", ["s"], ["out"])]
    return model(nodes, feeds, ["out"], {"a1": np.array([1], np.int64), "a2": np.array(removed, np.int64)}), feeds


def test_unsqueeze_squeeze_of_the_same_axis_cancels():
    p, feeds = _unsqueeze_squeeze([-2])
    assert check_rule(p, UNSQUEEZE_SQUEEZE, feeds, fires=True) == ["Relu"]


def test_unsqueeze_squeeze_condition_refuses_another_axis():
    p, feeds = _unsqueeze_squeeze([0])
    assert check_rule(p, UNSQUEEZE_SQUEEZE, feeds, fires=False) == ["Unsqueeze", "Squeeze", "Relu"]
