"""A graph whose nodes are not in topological order (onnxruntime's quantizer appends the Squeeze nodes it adds at
the end of the list; onnxruntime sorts the graph) builds as onnxruntime runs it; a cycle is one clear error."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

from webinfer.backend import WebinferRep
from webinfer.errors import WebinferError

F = onnx.TensorProto.FLOAT


def model(nodes):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [2, 3])],
                          [helper.make_tensor_value_info("y", F, [2, 3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_nodes_out_of_order_run_as_onnxruntime_runs_them():
    m = model([helper.make_node("Mul", ["a", "b"], ["y"]),   # reads what the nodes below produce
               helper.make_node("Relu", ["x"], ["a"]),
               helper.make_node("Neg", ["a"], ["n"]),
               helper.make_node("Add", ["n", "x"], ["b"])])
    x = np.random.default_rng(2).standard_normal((2, 3)).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(WebinferRep(m).run({"x": x})[0], want, rtol=1e-6)


def test_a_cycle_is_refused_in_one_line():
    m = model([helper.make_node("Relu", ["b"], ["a"]), helper.make_node("Add", ["a", "x"], ["b"]),
               helper.make_node("Identity", ["b"], ["y"])])
    with pytest.raises(WebinferError, match="cycle"):
        WebinferRep(m).run({"x": np.zeros((2, 3), np.float32)})
