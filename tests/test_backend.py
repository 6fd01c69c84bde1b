"""webinfer.backend: which graph inputs are baked in as shape arithmetic (host_input_names), checked on a
CenterCropPad-like graph against onnx.reference."""

import numpy as np
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from webinfer.backend import WebinferRep, host_input_names


def _crop_pad_model():
    """pads = Concat(d, d) with d = Max(target - Shape(x), 0) / 2: Pad's pads computed from the input `target`."""
    nodes = [helper.make_node("Shape", ["x"], ["xs"]),
             helper.make_node("Sub", ["target", "xs"], ["diff"]),
             helper.make_node("Max", ["diff", "zero"], ["grow"]),
             helper.make_node("Div", ["grow", "two"], ["half"]),
             helper.make_node("Concat", ["half", "half"], ["pads"], axis=0),
             helper.make_node("Pad", ["x", "pads"], ["y"]),
             helper.make_node("Add", ["target", "one"], ["t1"])]
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
                     helper.make_tensor_value_info("target", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor(n, TensorProto.INT64, [1], [v]) for n, v in (("zero", 0), ("two", 2), ("one", 1))])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def test_integer_input_through_shape_arithmetic_is_baked():
    model = _crop_pad_model()
    assert host_input_names(model) == {"target"}  # the dead Add does not make it data
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(3, 4), "target": np.array([7, 6], np.int64)}
    rep = WebinferRep(model)
    (got,) = rep.run(feeds)
    np.testing.assert_array_equal(got, ReferenceEvaluator(model).run(None, feeds)[0])
    assert {p["op"]: p["where"] for p in rep.placement}["Pad"] == "gpu"


def test_an_input_that_is_also_data_is_not_baked():
    model = _crop_pad_model()
    model.graph.output.append(helper.make_tensor_value_info("t1", TensorProto.INT64, None))
    assert host_input_names(model) == set()
    model.graph.input[1].type.tensor_type.elem_type = TensorProto.FLOAT  # floats only directly in host positions
    del model.graph.output[1]
    assert host_input_names(model) == set()


def test_range_bounds_are_baked_only_when_integer():
    for dtype, baked in ((TensorProto.INT64, {"s", "l", "d"}), (TensorProto.FLOAT, set())):
        g = helper.make_graph([helper.make_node("Range", ["s", "l", "d"], ["y"])], "g",
                              [helper.make_tensor_value_info(n, dtype, []) for n in "sld"],
                              [helper.make_tensor_value_info("y", dtype, None)])
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
        assert host_input_names(model) == baked
    feeds = {"s": np.array(0.5, np.float32), "l": np.array(4.0, np.float32), "d": np.array(0.75, np.float32)}
    rep = WebinferRep(model)
    (got,) = rep.run(feeds)
    np.testing.assert_allclose(got, ReferenceEvaluator(model).run(None, feeds)[0])
    assert rep.placement[0]["where"] == "gpu"  # computed from the fed values, not folded
