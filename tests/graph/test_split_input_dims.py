"""Two inputs that name an axis alike (a copied ``dynamic_axes`` dict) but of different sizes: onnxruntime binds
no symbolic dim across inputs, so neither may webinfer when the inputs never meet on that axis. Where they do
meet (added together), the name stays one dim. Outputs equal onnxruntime's."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

from webinfer.backend import WebinferRep
from webinfer.errors import WebinferError
from webinfer.graph.importer import import_model
from webinfer.graph.passes import split_input_dims

F, I64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64
RNG = np.random.default_rng(5)


def cells_model():
    """LORE's shape: features [b, n, w] plus, per cell, corner indices [b, n, w] (w = 8 there) into a table."""
    table = onnx.numpy_helper.from_array(RNG.standard_normal((16, 6)).astype(np.float32), "table")
    k0 = onnx.numpy_helper.from_array(np.array(0, np.int64), "k0")
    k1 = onnx.numpy_helper.from_array(np.array(3, np.int64), "k1")
    nodes = [helper.make_node("Gather", ["idx", "k0"], ["c0"], axis=2),       # [b, n]
             helper.make_node("Gather", ["idx", "k1"], ["c1"], axis=2),
             helper.make_node("Gather", ["table", "c0"], ["e0"], axis=0),     # [b, n, 6]
             helper.make_node("Gather", ["table", "c1"], ["e1"], axis=0),
             helper.make_node("Add", ["e0", "e1"], ["e"]),
             helper.make_node("MatMul", ["feat", "proj"], ["f"]),             # [b, n, 6]
             helper.make_node("Add", ["f", "e"], ["y"])]
    proj = onnx.numpy_helper.from_array(RNG.standard_normal((6, 6)).astype(np.float32), "proj")
    dims = ["batch", "height", "width"]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("feat", F, dims),
                                       helper.make_tensor_value_info("idx", I64, dims)],
                          [helper.make_tensor_value_info("y", F, ["batch", "height", 6])],
                          initializer=[table, k0, k1, proj])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def added_model():
    dims = ["batch", "n"]
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "g",
                          [helper.make_tensor_value_info("a", F, dims), helper.make_tensor_value_info("b", F, dims)],
                          [helper.make_tensor_value_info("y", F, dims)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_unrelated_axes_named_alike_run_with_different_sizes():
    m = cells_model()
    feeds = {"feat": RNG.standard_normal((1, 5, 6)).astype(np.float32),
             "idx": RNG.integers(0, 16, (1, 5, 8)).astype(np.int64)}
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = WebinferRep(m).run(feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_only_the_unrelated_name_is_split():
    ir_model = import_model(cells_model())
    assert split_input_dims.run(ir_model) == 1
    shapes = {v.name: [str(d) for d in v.shape] for v in ir_model.graph.inputs}
    assert shapes == {"feat": ["batch", "height", "width"], "idx": ["batch", "height", "width_1"]}


def test_axes_that_meet_stay_one_dim():
    m = added_model()
    ir_model = import_model(m)
    assert split_input_dims.run(ir_model) == 0
    rep = WebinferRep(m)
    a, b = (RNG.standard_normal((2, 3)).astype(np.float32) for _ in range(2))
    np.testing.assert_allclose(rep.run({"a": a, "b": b})[0], a + b, rtol=1e-6)
    with pytest.raises(WebinferError, match="dim 'n'"):
        rep.run({"a": a, "b": RNG.standard_normal((2, 4)).astype(np.float32)})


def test_a_name_the_declared_outputs_carry_stays_shared():
    """x[batch, 5] -> y[batch, 4] and ids[batch, 3] -> e[batch, 3, 2] never meet, but the exporter declared both
    outputs' batch one name: kept (users see the names they exported); the model runs as onnxruntime runs it."""
    table = onnx.numpy_helper.from_array(RNG.standard_normal((7, 2)).astype(np.float32), "table")
    w = onnx.numpy_helper.from_array(RNG.standard_normal((5, 4)).astype(np.float32), "w")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Gather", ["table", "ids"], ["e"])], "g",
        [helper.make_tensor_value_info("x", F, ["batch", 5]), helper.make_tensor_value_info("ids", I64, ["batch", 3])],
        [helper.make_tensor_value_info("y", F, ["batch", 4]), helper.make_tensor_value_info("e", F, ["batch", 3, 2])],
        initializer=[table, w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    ir_model = import_model(m)
    assert split_input_dims.run(ir_model) == 0
    assert [str(d) for d in ir_model.graph.inputs[1].shape] == ["batch", "3"]
    feeds = {"x": RNG.standard_normal((2, 5)).astype(np.float32), "ids": RNG.integers(0, 7, (2, 3)).astype(np.int64)}
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for got, ref in zip(WebinferRep(m).run(feeds), want):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
