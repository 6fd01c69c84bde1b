"""Ops without a kernel but with an ONNX function body are inlined (graph/functions.py): FlexAttention with
its modifier subgraphs and GQA, checked against onnx.reference; ops with a kernel keep it."""

import numpy as np
import onnx
from onnx import TensorProto, helper
from oprefs import check_model, make_model

from webinfer.build import imported
from webinfer.codegen.registry import has_lowering
from webinfer.graph.functions import function_ops

rng = np.random.default_rng(0)
PREVIEW = "ai.onnx.preview"


def _flex(feeds: dict, **attrs) -> onnx.ModelProto:
    node = helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], domain=PREVIEW, **attrs)
    model = make_model([node], feeds, ["y"], opset=26)
    model.opset_import.append(helper.make_opsetid(PREVIEW, 1))
    return model


def _softcap_graph(cap: float) -> onnx.GraphProto:
    nodes = [helper.make_node("Div", ["s", "cap"], ["a"]), helper.make_node("Tanh", ["a"], ["b"]),
             helper.make_node("Mul", ["b", "cap"], ["out"])]
    return helper.make_graph(nodes, "score_mod", [helper.make_tensor_value_info("s", TensorProto.FLOAT, None)],
                             [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                             [helper.make_tensor("cap", TensorProto.FLOAT, [], [cap])])


def test_flex_attention_gqa_with_score_mod():
    feeds = {"q": rng.standard_normal((2, 6, 5, 8)).astype(np.float32),
             "k": rng.standard_normal((2, 2, 7, 8)).astype(np.float32),
             "v": rng.standard_normal((2, 2, 7, 4)).astype(np.float32)}
    model = _flex(feeds, score_mod=_softcap_graph(1.5), scale=0.7)
    assert function_ops(imported(model), has_lowering) == []  # inlined: nothing left to inline
    _, _, placement, gpu = check_model(model, feeds)
    assert gpu and "FlexAttention" not in {p["op"] for p in placement}


def test_ops_with_a_kernel_are_not_inlined():
    x = rng.standard_normal((3, 4)).astype(np.float32)
    model = make_model([helper.make_node("Gelu", ["x"], ["y"])], {"x": x}, ["y"], opset=20)
    assert function_ops(imported(model), has_lowering) == []
    assert [n.op_type for n in imported(model).graph] == ["Gelu"]


def test_inspect_counts_inlined_ops_as_supported():
    from webinfer.codegen.support import op_uses
    from webinfer.graph.importer import import_model

    x = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    uses = {u.label: u.supported for u in op_uses(import_model(_flex({"q": x, "k": x, "v": x})))}
    assert uses == {"ai.onnx.preview.FlexAttention": True}
