"""Chains (in fact any connected DAG) of elementwise ops -> one ``webinfer.FusedElementwise`` kernel.

Starting from each elementwise node, the group absorbs a producer when every use of the producer's output
is inside the group (so no intermediate has to be written out), up to ``MAX_BOUND`` distinct inputs that
need a binding (WebGPU's default is 8 storage buffers per stage; the output takes one). Float results
fuse, and integer/bool ones that cannot be shape arithmetic (a symbolic dim or more than 64 elements, e.g.
an attention mask built from Range(0, seq)); small static integer math stays for the lowering to compute
on the host. The fused node sits where the group's last node was; its inputs were all produced earlier.
"""

from __future__ import annotations

import onnx_ir as ir

from ...opschema import WEBINFER_DOMAIN
from ._program import Program, bound_count, external_inputs, fusable, use_webinfer_domain
from ._util import replace_value

MAX_BOUND = 6


def grow(graph: ir.Graph, root: ir.Node, position: dict) -> list[ir.Node]:
    """The group rooted at ``root``, in graph order."""
    members = {id(root): root}
    changed = True
    while changed:
        changed = False
        for node in list(members.values()):
            for v in node.inputs:
                p = v.producer() if v is not None else None
                if p is None or id(p) in members or p.graph is not graph or not fusable(p):
                    continue
                if v.is_graph_output() or any(id(u.node) not in members for u in v.uses()):
                    continue
                trial = sorted([*members.values(), p], key=lambda n: position[id(n)])
                if bound_count(external_inputs(trial)) > MAX_BOUND:
                    continue
                members[id(p)] = p
                changed = True
    return sorted(members.values(), key=lambda n: position[id(n)])


def fuse(graph: ir.Graph, members: list[ir.Node]) -> None:
    root = members[-1]
    inputs = external_inputs(members)
    fused = ir.Node(WEBINFER_DOMAIN, "FusedElementwise", inputs,
                    attributes=Program.from_nodes(members, inputs).to_attributes(), name=root.name, num_outputs=1)
    graph.insert_before(root, fused)
    out, old = fused.outputs[0], root.outputs[0]
    out.dtype, out.shape = old.dtype, old.shape
    replace_value(graph, old, out)  # the fused output is fresh: always possible
    for node in reversed(members):
        graph.remove(node, safe=True)


def run(model: ir.Model) -> int:
    graph = model.graph
    position = {id(n): i for i, n in enumerate(graph)}
    fused = 0
    for root in reversed(list(graph)):
        if root.graph is not graph or not fusable(root):
            continue
        members = grow(graph, root, position)
        if len(members) > 1:
            use_webinfer_domain(model)
            fuse(graph, members)
            fused += len(members)
    return fused
