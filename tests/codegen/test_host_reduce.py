"""A reduction of shape arithmetic stays shape arithmetic: PicoDet's post-processing (paddle2onnx) takes
``k = ReduceMin(Concat(Shape(boxes NMS kept)[0:1], [keep_top_k]))`` for its TopK, a count known only after NMS
ran. Outputs equal onnxruntime's for inputs that keep fewer and more boxes than ``keep_top_k``."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

from webinfer.backend import WebinferRep

F, I64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64


def const(name, value):
    return helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(np.array(value, np.int64)))


def model(op: str):
    nodes = [const("zero_f", 0), const("top", [3]), const("one", [1]), const("two", [2]), const("ax0", [0]),
             helper.make_node("Cast", ["zero_f"], ["zero"], to=F),
             helper.make_node("Greater", ["x", "zero"], ["pos"]),
             helper.make_node("NonZero", ["pos"], ["idx"]),                 # [1, count]
             helper.make_node("Shape", ["idx"], ["s"]),
             helper.make_node("Slice", ["s", "one", "two"], ["count"]),       # [count]
             helper.make_node("Concat", ["count", "top"], ["both"], axis=0),
             helper.make_node(op, ["both"], ["k0"], keepdims=0, axes=[0]),   # min(count, 3) (or max, sum)
             helper.make_node("Unsqueeze", ["k0", "ax0"], ["k"]),
             helper.make_node("TopK", ["x", "k"], ["v", "i"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [8])],
                          [helper.make_tensor_value_info("v", F, None), helper.make_tensor_value_info("i", I64, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("op", ["ReduceMin", "ReduceMax"])
@pytest.mark.parametrize("positives", [2, 6])
def test_topk_of_a_reduced_count_matches_onnxruntime(op, positives):
    m = model(op)
    rng = np.random.default_rng(positives)
    x = np.concatenate([rng.uniform(0.1, 1.0, positives), -rng.uniform(0.1, 1.0, 8 - positives)])
    x = rng.permutation(x).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = WebinferRep(m).run({"x": x})
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), w)
