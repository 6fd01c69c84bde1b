"""Identity elimination: onnx-ir's IdentityEliminationPass (an Identity that is a graph output takes
its input's place and name, unless that input is a graph input, when the node stays), and Expand to the
shape its input already has (transformers' mask exports write one before the final Where: a no-op that
would keep the Where from fusing with the mask's other elementwise steps)."""

from __future__ import annotations

import onnx_ir as ir
from onnx_ir.passes.common import IdentityEliminationPass

from ._util import count_nodes, replace_value


def run(model: ir.Model) -> int:
    before = count_nodes(model)
    IdentityEliminationPass()(model)
    graph = model.graph
    for node in list(graph):
        if node.op_type == "Expand" and node.domain in ("", "ai.onnx") and _same_known_shape(
                node.inputs[0], node.outputs[0]) and replace_value(graph, node.outputs[0], node.inputs[0]):
            graph.remove(node, safe=True)  # the target shape's producers go with dce
    return before - count_nodes(model)


def _same_known_shape(a: ir.Value | None, b: ir.Value) -> bool:
    """Both shapes fully known and equal dim by dim (named symbolic dims by name)."""
    if a is None or a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
        return False
    for x, y in zip(a.shape.dims, b.shape.dims):
        if isinstance(x, int) or isinstance(y, int):
            if x != y:
                return False
        elif x.value is None or x.value != y.value:
            return False
    return True
