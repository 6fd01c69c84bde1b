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
from .rules import Match, Rule, apply


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


def _view(node: ir.Node) -> Match | None:
    x = node.inputs[0] if node.inputs else None
    return Match([node], {"node": node, "x": x}) if x is not None else None


def _same_shape(m: Match) -> bool:
    """The result's shape is the input's, known dim by dim."""
    return same_known_shape(m["x"].shape, m["node"].outputs[0].shape)


def _drop(model: ir.Model, m: Match) -> bool:
    if not replace_value(model.graph, m["node"].outputs[0], m["x"]):
        return False
    model.graph.remove(m["node"], safe=True)  # the target shape's producers go with dce
    return True


NOOP_VIEW = Rule("noop_view", ("Expand", "Reshape"), _view, _same_shape, _drop)


def run(model: ir.Model) -> int:
    before = count_nodes(model)
    _ScopedIdentityElimination()(model)
    apply(model, [NOOP_VIEW])
    return before - count_nodes(model)
