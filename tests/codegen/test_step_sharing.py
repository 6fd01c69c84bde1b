"""Fewer kernels and shaders for the same results: steps whose results nothing reads are dropped, and the
parts of a Concat share one shader. Outputs are compared with onnx's ReferenceEvaluator."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from webinfer.build import build
from webinfer.runtime.inference import InferenceSession


def _session(nodes, inputs, outputs, tmp_path, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    proto.ir_version = 9
    build(proto, str(tmp_path / "a.wi"), target="software")
    return proto, InferenceSession(str(tmp_path / "a.wi"))


def test_a_value_used_only_for_its_shape_runs_no_kernel(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Max", ["x", "x"], ["m"]), helper.make_node("Shape", ["m"], ["s"]),
             helper.make_node("Expand", ["one", "s"], ["e"]), helper.make_node("Add", ["e", "x"], ["y"])]
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    proto, session = _session(nodes, [x], [y], tmp_path, [one])
    labels = [s.label for s in session.program.steps]
    assert not any("Max" in label for label in labels), labels
    assert [r.dispatches for r in session.program.placement if r.op == "Max"] == [0]
    feeds = {"x": np.arange(5, dtype=np.float32)}
    np.testing.assert_array_equal(session.run(["y"], feeds)[0], ReferenceEvaluator(proto).run(None, feeds)[0])


def test_the_parts_of_a_concat_share_one_shader(tmp_path):
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, ["n", 3])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, ["n", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    proto, session = _session([helper.make_node("Concat", ["a", "b"], ["y"], axis=1)], [a, b], [y], tmp_path)
    steps = session.program.steps
    assert len(steps) == 2 and steps[0].shader == steps[1].shader
    rng = np.random.default_rng(0)
    feeds = {"a": rng.standard_normal((4, 3)).astype(np.float32), "b": rng.standard_normal((4, 3)).astype(np.float32)}
    np.testing.assert_array_equal(session.run(["y"], feeds)[0], ReferenceEvaluator(proto).run(None, feeds)[0])


def test_ranges_from_zero_and_from_an_offset_share_one_shader(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["p", "n"])
    ys = [helper.make_tensor_value_info(y, TensorProto.INT64, None) for y in ("a", "b")]
    i64 = lambda name, v: helper.make_tensor(name, TensorProto.INT64, [], [v])  # noqa: E731
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "zero"], ["p"]),
             helper.make_node("Gather", ["s", "one"], ["n"]), helper.make_node("Add", ["p", "n"], ["pn"]),
             helper.make_node("Range", ["zero", "n", "one"], ["a"]), helper.make_node("Range", ["p", "pn", "one"], ["b"])]
    proto, session = _session(nodes, [x], ys, tmp_path, [i64("zero", 0), i64("one", 1)])
    steps = session.program.steps
    assert len(steps) == 2 and steps[0].shader == steps[1].shader, steps
    feeds = {"x": np.zeros((3, 70), np.float32)}
    for got, want in zip(session.run(["a", "b"], feeds), ReferenceEvaluator(proto).run(None, feeds)):
        np.testing.assert_array_equal(got, want)
