"""The clean-up rules (reorder.py, unflatten_matmuls.py, identity.py's no-op views), each alone: it fires on a
tiny graph and the result computes what onnx.reference computes on the original; a look-alike its
condition refuses stays as it was."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as h
from fusion_util import model, randn
from rule_util import check_rule

from webinfer.graph.passes.identity import NOOP_VIEW
from webinfer.graph.passes.reorder import ADD_INTO_RANGE, SINK_CAST
from webinfer.graph.passes.unflatten_matmuls import UNFLATTEN_MATMUL

D = onnx.TensorProto.DOUBLE


def _cast_transpose(cast_out: bool):
    feeds = {"x": randn(2, 3)}
    nodes = [h.make_node("Cast", ["x"], ["c"], to=D), h.make_node("Transpose", ["c"], ["t"], perm=[1, 0]),
             h.make_node("Neg", ["t"], ["out"])]
    return model(nodes, feeds, ["out", "c"] if cast_out else ["out"]), feeds


def test_sink_cast_moves_the_cast_below_a_transpose():
    p, feeds = _cast_transpose(False)
    assert check_rule(p, SINK_CAST, feeds, fires=True) == ["Transpose", "Cast", "Neg"]


def test_sink_cast_condition_refuses_a_cast_that_is_an_output():
    p, feeds = _cast_transpose(True)
    assert check_rule(p, SINK_CAST, feeds, fires=False) == ["Cast", "Transpose", "Neg"]


def _range_add(c):
    feeds = {"s": np.array(0, np.int64), "l": np.array(5, np.int64), "d": np.array(1, np.int64), "c": c}
    nodes = [h.make_node("Range", ["s", "l", "d"], ["r"]), h.make_node("Add", ["r", "c"], ["out"])]
    return model(nodes, feeds, ["out"]), feeds


def test_add_into_range_moves_the_offset_into_the_bounds():
    p, feeds = _range_add(np.array(3, np.int64))
    assert check_rule(p, ADD_INTO_RANGE, feeds, fires=True) == ["Add", "Add", "Range"]


def test_add_into_range_condition_refuses_a_vector_offset():
    p, feeds = _range_add(np.array([3], np.int64))
    assert check_rule(p, ADD_INTO_RANGE, feeds, fires=False) == ["Range", "Add"]


def _flat_matmul(w_input: bool):
    feeds = {"x": randn(2, 3, 4), **({"w": randn(4, 5)} if w_input else {})}
    nodes = [h.make_node("Reshape", ["x", "s1"], ["f"]), h.make_node("MatMul", ["f", "w"], ["m"]),
             h.make_node("Reshape", ["m", "s2"], ["out"])]
    inits = {"s1": np.array([6, 4], np.int64), "s2": np.array([2, 3, 5], np.int64),
             **({} if w_input else {"w": randn(4, 5)})}
    return model(nodes, feeds, ["out"], inits), feeds


def test_unflatten_matmul_fires_on_view_matmul_view():
    p, feeds = _flat_matmul(False)
    assert check_rule(p, UNFLATTEN_MATMUL, feeds, fires=True) == ["MatMul"]


def test_unflatten_matmul_condition_refuses_a_weight_that_is_an_input():
    p, feeds = _flat_matmul(True)
    assert check_rule(p, UNFLATTEN_MATMUL, feeds, fires=False) == ["Reshape", "MatMul", "Reshape"]


def _expand(shape):
    feeds = {"x": randn(2, 3)}
    nodes = [h.make_node("Expand", ["x", "s"], ["e"]), h.make_node("Relu", ["e"], ["out"])]
    return model(nodes, feeds, ["out"], {"s": np.array(shape, np.int64)}), feeds


def test_noop_view_drops_an_expand_to_the_same_shape():
    p, feeds = _expand([2, 3])
    assert check_rule(p, NOOP_VIEW, feeds, fires=True) == ["Relu"]


def test_noop_view_condition_refuses_a_real_broadcast():
    p, feeds = _expand([4, 2, 3])
    assert check_rule(p, NOOP_VIEW, feeds, fires=False) == ["Expand", "Relu"]
