"""Reorderings that let elementwise work fuse (fewer kernels and shaders), each exact (rules):

- a Cast moves below the pure data movement that reads it (Flatten, Reshape, Squeeze, Unsqueeze, Expand,
  Transpose, Slice, Tile, and the data input of Gather/GatherND/GatherElements): movement copies values,
  so casting after it gives the same elements, and the Cast then meets the elementwise ops after the
  movement (transformers' masks: Cast(mask, bool) -> Flatten -> Gather -> Reshape -> And). A Cast read
  also by Shape stays for it (the lowering then runs no kernel for it: nothing reads its data);
- an integer Add of one value to a Range's output becomes the Range's bounds:
  Range(s, l, d) + c = Range(s + c, l + c, d) (position ids: Range(0, seq) + past).
"""

from __future__ import annotations

import onnx_ir as ir

from ._util import replace_value
from .rules import Match, Rule, pass_of

MOVES = {"Flatten", "Reshape", "Squeeze", "Unsqueeze", "Expand", "Transpose", "Slice", "Tile", "Gather",
         "GatherND", "GatherElements"}
_INTS = {ir.DataType.INT32, ir.DataType.INT64}
_MAX_ROUNDS = 16


def _default(node: ir.Node) -> bool:
    return node.domain in ("", "ai.onnx") and node.graph is not None


def _cast_mover(cast: ir.Node) -> Match | None:
    """Cast -> one movement op reading it as its data input (other readers, if any, being Shape)."""
    if not cast.inputs or cast.inputs[0] is None:
        return None
    out = cast.outputs[0]
    movers = [u.node for u in out.uses() if u.node.op_type in MOVES and u.idx == 0 and _default(u.node)]
    others = [u.node for u in out.uses() if u.node not in movers]
    if len(movers) != 1 or any(n.op_type != "Shape" for n in others) or movers[0].graph is not cast.graph:
        return None
    return Match([cast, movers[0]], {"cast": cast, "mover": movers[0], "others": others})


def _cast_mover_ok(m: Match) -> bool:
    """The Cast's result is no graph output and the movement reads it at its data input only, one output."""
    mover = m["mover"]
    if m["cast"].outputs[0].is_graph_output():
        return False
    return not any(n is mover for n in m["others"]) and len(mover.outputs) == 1


def _sink_cast(model: ir.Model, m: Match) -> bool:
    graph, cast, mover = model.graph, m["cast"], m["mover"]
    out = cast.outputs[0]
    moved = ir.Node("", mover.op_type, [cast.inputs[0], *mover.inputs[1:]],
                    attributes=list(mover.attributes.values()), num_outputs=1, name=mover.name)
    recast = ir.Node("", "Cast", [moved.outputs[0]], attributes=list(cast.attributes.values()), num_outputs=1,
                     name=cast.name)
    old = mover.outputs[0]
    moved.outputs[0].dtype, moved.outputs[0].shape = cast.inputs[0].dtype, old.shape
    recast.outputs[0].dtype, recast.outputs[0].shape = old.dtype, old.shape
    graph.insert_before(mover, [moved, recast])
    if not replace_value(graph, old, recast.outputs[0]):
        graph.remove([moved, recast], safe=True)
        return False
    graph.remove(mover, safe=True)
    if not out.uses():
        graph.remove(cast, safe=True)
    return True


def _range_add(add: ir.Node):
    """Range -> Add(., c): one match per side of the Add."""
    if len(add.inputs) != 2:
        return
    for i in (0, 1):
        r, c = add.inputs[i], add.inputs[1 - i]
        rng = r.producer() if r is not None else None
        if rng is None or rng.op_type != "Range" or not _default(rng) or rng.graph is not add.graph:
            continue
        yield Match([rng, add], {"range": rng, "add": add, "r": r, "c": c})


def _range_add_ok(m: Match) -> bool:
    """The Range's result read by the Add alone; c an integer scalar of its type."""
    r, c, out = m["r"], m["c"], m["add"].outputs[0]
    if len(list(r.uses())) != 1 or r.is_graph_output() or c is None or c.shape is None or len(c.shape):
        return False
    return r.dtype in _INTS and c.dtype == r.dtype and out.dtype == r.dtype


def _add_into_range(model: ir.Model, m: Match) -> bool:
    graph, add, rng, r, c = model.graph, m["add"], m["range"], m["r"], m["c"]
    out = add.outputs[0]
    start = ir.Node("", "Add", [rng.inputs[0], c], num_outputs=1)
    limit = ir.Node("", "Add", [rng.inputs[1], c], num_outputs=1)
    moved = ir.Node("", "Range", [start.outputs[0], limit.outputs[0], rng.inputs[2]], num_outputs=1,
                    name=rng.name)
    for v in (start.outputs[0], limit.outputs[0]):
        v.dtype, v.shape = r.dtype, ir.Shape([])
    moved.outputs[0].dtype, moved.outputs[0].shape = out.dtype, out.shape
    graph.insert_before(add, [start, limit, moved])
    if not replace_value(graph, out, moved.outputs[0]):
        graph.remove([start, limit, moved], safe=True)
        return False
    graph.remove(add, safe=True)
    graph.remove(rng, safe=True)
    return True


SINK_CAST = Rule("sink_cast", ("Cast",), _cast_mover, _cast_mover_ok, _sink_cast)
ADD_INTO_RANGE = Rule("add_into_range", ("Add",), _range_add, _range_add_ok, _add_into_range)
RULES = (SINK_CAST, ADD_INTO_RANGE)
run = pass_of(*RULES, rounds=_MAX_ROUNDS)
