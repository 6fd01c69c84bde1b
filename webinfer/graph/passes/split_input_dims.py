"""Graph inputs that share a dim name but never meet get a name each, as onnxruntime binds them.

Exporters name dynamic axes per input (torch's ``dynamic_axes``), and one dict copied for every input gives two
inputs the same name for axes of different sizes: LORE's cell features [batch, n, 256] and their corner
coordinates [batch, n, 8] both call their last axis "width". onnxruntime checks no symbolic dim across inputs;
a build that keeps them one dim refuses a run that feeds 256 and 8. A shared name is split (each later input's
occurrences renamed) when shape inference shows the inputs never meet on it: no node reads one value whose shape
or small integer elements hold the first name and another that holds a new one, and every value computed from a
renamed input has a known shape (nothing hides where its dims went). Otherwise (an attention mask added to
scores of the token ids' length), and where the declared outputs carry the name, it stays shared. Models with If/Loop/Scan or ops of other domains
(onnxruntime's GroupQueryAttention) keep their names: the walk does not see inside them.
"""

from __future__ import annotations

import re

import onnx_ir as ir

from ... import dims as D
from ..shapes import ShapeInference

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")  # a plain dim name (not "past + seq")


def run(model: ir.Model) -> int:
    graph = model.graph
    if any(a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS) for n in graph for a in n.attributes.values()):
        return 0
    if any(n.domain not in ("", "ai.onnx") for n in graph):  # (ops the walk does not infer: where names meet is unseen)
        return 0
    owners: dict[str, list[ir.Value]] = {}
    taken: set[str] = set()
    for inp in graph.inputs:
        for d in inp.shape or ():
            name = d.value if isinstance(d, ir.SymbolicDim) else None
            if name and NAME.match(str(name)):
                taken.add(name)
                if inp not in owners.setdefault(name, []):
                    owners[name].append(inp)
    # a name the declared outputs carry is the exporter's word that those sizes are one (y[batch] and e[batch]
    # from x[batch] and ids[batch]): it stays shared, and users keep seeing the names they exported
    declared = {d.value for o in graph.outputs for d in (o.shape or ()) if isinstance(d, ir.SymbolicDim)}
    split = 0
    for name, inputs in owners.items():
        if len(inputs) < 2 or name in declared:
            continue
        old = {inp: inp.shape for inp in inputs[1:]}
        fresh = []
        for inp in inputs[1:]:
            new = _unique(name, taken)
            fresh.append(new)
            inp.shape = ir.Shape([ir.SymbolicDim(new) if isinstance(d, ir.SymbolicDim) and d.value == name else d
                                  for d in inp.shape])
        if _apart(model, inputs[1:], {name, *fresh}):
            taken.update(fresh)
            split += len(fresh)
        else:
            for inp, shape in old.items():
                inp.shape = shape
    return split


def _unique(name: str, taken: set[str]) -> str:
    k = 1
    while f"{name}_{k}" in taken:
        k += 1
    taken.add(f"{name}_{k}")
    return f"{name}_{k}"


class _Meet(Exception):
    """Two names of the group met (or a value computed from a renamed input lost its shape): stop the walk."""


class _Walk(ShapeInference):
    """Shape inference that checks each node's inputs before inferring it, and stops at the first meeting."""

    def __init__(self, model: ir.Model, renamed: list[ir.Value], group: set[str]):
        super().__init__(model)
        self.group, self.tainted = group, set(renamed)

    def names(self, v: ir.Value) -> set[str] | None:
        shape = self.shape(v)
        if shape is None or any(d is None for d in shape):
            return None
        out = set().union(*(D.names(d) for d in shape)) if shape else set()
        for d in self.values.get(v) or ():
            if d is None:  # an element not known: nothing says which names it holds
                return None
            out |= D.names(d)
        return out

    def node(self, node: ir.Node) -> None:
        seen: set[str] = set()
        for v in node.inputs:
            if v is None:
                continue
            got = self.names(v)
            if got is None and v in self.tainted:
                raise _Meet
            seen |= (got or set()) & self.group
        if len(seen) > 1:
            raise _Meet
        if any(v in self.tainted for v in node.inputs if v is not None):
            self.tainted.update(node.outputs)
        super().node(node)


def _apart(model: ir.Model, renamed: list[ir.Value], group: set[str]) -> bool:
    """Whether no node reads two names of ``group`` (in shapes or small integer values), every value computed
    from a renamed input having a known shape."""
    walk = _Walk(model, renamed, group)
    try:
        walk.run()
    except _Meet:
        return False
    outputs = [v for v in model.graph.outputs if v in walk.tainted]
    return all(walk.names(v) is not None for v in outputs)
