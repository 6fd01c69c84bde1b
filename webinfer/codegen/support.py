"""Which ops of a model webinfer can lower, found before any work is done, so that a build names ALL the
unsupported ops at once (and ``webinfer inspect model.onnx`` can list them) instead of stopping at the first.

An op is supported when it has a lowering (``registry.LOWERINGS``), graph/contrib expands it into ops
that have one (``opschema``: ``expanded``), or ONNX defines it as a function that the build inlines
(graph/functions.py; the ops of its body are checked after inlining). A node of an unsupported op whose inputs
are all build-time constants is not a problem when the op can be folded (``opschema``): the lowering
evaluates it with ONNX's reference evaluator. Subgraphs (If/Loop/Scan bodies) are searched too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import onnx_ir as ir

from ..errors import UnsupportedOpError
from ..graph.functions import all_graphs, inlinable
from ..opschema import op_key, op_label, schema
from .registry import LOWERINGS, load_all


@dataclass
class OpUse:
    domain: str
    op: str
    nodes: list[str] = field(default_factory=list)  # node names (or #index) that use it
    supported: bool = True
    folded: int = 0  # nodes of an unsupported op that fold at build time (all inputs constant)

    @property
    def label(self) -> str:
        return op_label(self.domain, self.op)

    @property
    def failing(self) -> list[str]:
        """The nodes that stop a build (unsupported and not folded)."""
        return [] if self.supported else self.nodes


def op_uses(model: ir.Model, constant_inputs: Iterable[str] = ()) -> list[OpUse]:
    """Every (domain, op) of the model, in first-use order, with whether webinfer lowers it."""
    load_all()
    uses: dict[str, OpUse] = {}
    for graph in all_graphs(model.graph):
        const = set(graph.initializers) | set(constant_inputs)
        for index, node in enumerate(graph):
            key = op_key(node.domain, node.op_type)
            spec = schema(node.op_type, node.domain)
            if key not in uses:
                version = model.opset_imports.get(node.domain, 1)
                ok = key in LOWERINGS or spec.expanded or inlinable(node.domain, node.op_type, version)
                uses[key] = OpUse(node.domain, node.op_type, supported=ok)
            use = uses[key]
            inputs = [v for v in node.inputs if v is not None]
            folds = (node.op_type == "Constant" and node.domain in ("", "ai.onnx")) or (
                all(v.name in const for v in inputs) and spec.may_fold)  # no inputs: folds too
            if folds:
                const.update(v.name for v in node.outputs)
            if not use.supported and folds:
                use.folded += 1
            else:
                use.nodes.append(node.name or f"#{index}")
    return list(uses.values())


def check_supported(model: ir.Model, constant_inputs: Iterable[str] = ()) -> None:
    """Raise one UnsupportedOpError naming every op of the model that webinfer cannot lower."""
    bad = [u for u in op_uses(model, constant_inputs) if u.failing]
    if not bad:
        return
    if len(bad) == 1 and len(bad[0].nodes) == 1:
        raise UnsupportedOpError(f"unsupported op {bad[0].label} (node {bad[0].nodes[0]!r})")

    def one(u: OpUse) -> str:
        n = len(u.nodes)
        return f"{u.label} (node {u.nodes[0]!r})" if n == 1 else f"{u.label} ({n} nodes, first {u.nodes[0]!r})"

    raise UnsupportedOpError(f"{len(bad)} unsupported op{'s' if len(bad) > 1 else ''}: " + ", ".join(map(one, bad)))
