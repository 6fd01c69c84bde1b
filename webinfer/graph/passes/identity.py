"""Identity elimination: onnx-ir's IdentityEliminationPass (an Identity that is a graph output takes
its input's place and name, unless that input is a graph input, when the node stays), and Expand or Reshape to
the shape its input already has: transformers' mask exports write an Expand before the final Where (a no-op
that would keep the Where from fusing with the mask's other elementwise steps), and torch dynamo writes a
Reshape to the same [b, h, s, d] after attention (it would hide the heads transpose that the KV-cache rewrite
absorbs)."""

from __future__ import annotations

import onnx_ir as ir
from onnx_ir.passes.common import IdentityEliminationPass

from ._util import count_nodes, replace_value, same_known_shape


class _ScopedIdentityElimination(IdentityEliminationPass):
    """onnx-ir's pass, except where an Identity is what makes a subgraph output of a value the subgraph
    does not define (a value captured from the outer scope, or one that already is a graph output, e.g.
    an If branch returning the enclosing branch's output): a graph's outputs must be its own values, so
    that Identity stays (onnx-ir would raise "already an output of a different graph")."""

    def _try_eliminate_identity_node(self, node: ir.Node) -> bool:
        if node.op_type == "Identity" and node.domain == "" and len(node.inputs) == 1 and node.inputs[0] is not None \
                and len(node.outputs) == 1 and node.outputs[0].is_graph_output():
            x = node.inputs[0]
            if x.is_graph_output() or x.graph is not node.graph:
                return False
        return super()._try_eliminate_identity_node(node)


def run(model: ir.Model) -> int:
    before = count_nodes(model)
    _ScopedIdentityElimination()(model)
    graph = model.graph
    for node in list(graph):
        x = node.inputs[0] if node.inputs else None
        if node.op_type in ("Expand", "Reshape") and node.domain in ("", "ai.onnx") and x is not None and \
                same_known_shape(x.shape, node.outputs[0].shape) and replace_value(graph, node.outputs[0], x):
            graph.remove(node, safe=True)  # the target shape's producers go with dce
    return before - count_nodes(model)
