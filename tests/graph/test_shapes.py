"""Shape inference over symbolic dims (graph/shapes.py) and the fold_shapes pass, checked against what
onnxruntime computes: every inferred dim, evaluated at concrete sizes, must equal the shape of the value that
onnxruntime produces, and every inferred small integer value its elements."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from webinfer import dims as D
from webinfer.graph import shapes
from webinfer.graph.importer import import_model
from webinfer.graph.passes import fold_constants, fold_shapes

DECODERS = Path(__file__).parents[1] / "llm" / "data" / "decoders"
SIZES = {"batch_size": 1, "sequence_length": 3, "past_sequence_length": 5, "batch": 1, "sequence": 3,
         "past_sequence": 5, "total_sequence": 8}


def _feeds(sess: ort.InferenceSession) -> dict:
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else D.evaluate(D.to_json(shapes.dim_from_ir(ir.SymbolicDim(d))), SIZES)
                 for d in i.shape]
        if i.name == "input_ids":
            feeds[i.name] = np.arange(3, 3 + int(np.prod(shape)), dtype=np.int64).reshape(shape)
        elif i.name == "position_ids":
            feeds[i.name] = np.arange(5, 8, dtype=np.int64)[None]
        elif i.name == "attention_mask":
            feeds[i.name] = np.ones(shape, np.int64)
        else:
            feeds[i.name] = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    return feeds


@pytest.mark.parametrize("name", ["llama-optimum", "gpt2-optimum", "phi3-optimum", "qwen3-dynamo"])
def test_inferred_shapes_and_values_match_onnxruntime(name):
    model = import_model(str(DECODERS / f"{name}.onnx"))
    fold_constants.run(model)
    si = shapes.ShapeInference(model).run()
    known = {v: s for v, s in si.shapes.items() if v.name and s is not None and all(d is not None for d in s)}
    for v in si.values:
        known.setdefault(v, si.shapes.get(v))
    for v in known:
        v.shape = None  # keep onnxruntime from checking our claims: we compare them ourselves below
    graph_outputs = {o.name for o in model.graph.outputs}
    extra = [v for v in known if v.name not in graph_outputs and not v.is_graph_input()]
    model.graph.outputs.extend(extra)
    proto = ir.serde.serialize_model(model)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    results = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, _feeds(sess))))
    checked = values = 0
    for v in extra:
        got = results[v.name]
        shape = known[v]
        want = [d if isinstance(d, int) else D.evaluate(D.to_json(d), SIZES) for d in shape]
        assert list(got.shape) == want, (v.name, shape)
        checked += 1
        vals = si.values.get(v)
        if vals is not None and all(x is not None for x in vals):
            assert [D.evaluate(D.to_json(x), SIZES) if not isinstance(x, int) else x for x in vals] == \
                got.reshape(-1).tolist(), v.name
            values += 1
    # the attention's reshapes: q heads resolved from reshape(q, [b, s, -1, 16])
    assert checked > 100 and values > 10, (checked, values)


def _model(nodes, inputs, outputs, inits=()):
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(inits)),
                             opset_imports=[helper.make_opsetid("", 20)])


def test_reshape_minus_one_on_symbolic_dims_resolves():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s", 256])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("Shape", ["x"], ["shp"]),
        helper.make_node("Gather", ["shp", "zero"], ["b"], axis=0),
        helper.make_node("Gather", ["shp", "one"], ["s"], axis=0),
        helper.make_node("Unsqueeze", ["b", "ax"], ["b1"]),
        helper.make_node("Unsqueeze", ["s", "ax"], ["s1"]),
        helper.make_node("Concat", ["b1", "s1", "minus1", "d64"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    inits = [helper.make_tensor("zero", TensorProto.INT64, [], [0]), helper.make_tensor("one", TensorProto.INT64, [], [1]),
             helper.make_tensor("ax", TensorProto.INT64, [1], [0]), helper.make_tensor("minus1", TensorProto.INT64, [1], [-1]),
             helper.make_tensor("d64", TensorProto.INT64, [1], [64])]
    model = import_model(_model(nodes, [x], [y], inits))
    shapes.infer(model)
    y_value = model.graph.outputs[0]
    assert [str(d) if not isinstance(d, int) else d for d in y_value.shape] == ["b", "s", 4, 64]


def test_scale_from_shape_folds_to_a_constant():
    """GPT-2's scale: 1 / sqrt(float(Shape(k)[-1:])) on a static head size becomes a constant."""
    k = helper.make_tensor_value_info("k", TensorProto.FLOAT, ["b", 4, "t", 16])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("Shape", ["k"], ["shp"]),
        helper.make_node("Slice", ["shp", "start", "end"], ["last"]),
        helper.make_node("Cast", ["last"], ["lastf"], to=TensorProto.FLOAT),
        helper.make_node("Sqrt", ["lastf"], ["root"]),
        helper.make_node("Div", ["k", "root"], ["out"]),
    ]
    inits = [helper.make_tensor("start", TensorProto.INT64, [1], [-1]),
             helper.make_tensor("end", TensorProto.INT64, [1], [2**63 - 1])]
    proto = _model(nodes, [k], [out], inits)
    model = import_model(proto)
    fold_shapes.run(model)
    assert [n.op_type for n in model.graph] == ["Div"]
    (div,) = model.graph
    assert div.inputs[1].const_value.numpy().reshape(-1).tolist() == [4.0]
    feeds = {"k": np.random.default_rng(1).standard_normal((2, 4, 3, 16)).astype(np.float32)}
    want = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = ort.InferenceSession(ir.serde.serialize_model(model).SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    onnx.checker.check_model(ir.serde.serialize_model(model))
