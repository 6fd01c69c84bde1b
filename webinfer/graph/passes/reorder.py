"""Reorderings that let elementwise work fuse (fewer kernels and shaders), each exact:

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

MOVES = {"Flatten", "Reshape", "Squeeze", "Unsqueeze", "Expand", "Transpose", "Slice", "Tile", "Gather",
         "GatherND", "GatherElements"}
_INTS = {ir.DataType.INT32, ir.DataType.INT64}
_MAX_ROUNDS = 16


def _default(node: ir.Node) -> bool:
    return node.domain in ("", "ai.onnx") and node.graph is not None


def sink_cast(graph: ir.Graph, cast: ir.Node) -> bool:
    out = cast.outputs[0]
    if out.is_graph_output():
        return False
    movers = [u.node for u in out.uses() if u.node.op_type in MOVES and u.idx == 0 and _default(u.node)]
    others = [u.node for u in out.uses() if u.node not in movers]
    if len(movers) != 1 or any(n.op_type != "Shape" for n in others) or movers[0].graph is not graph:
        return False
    mover = movers[0]
    if any(n is mover for n in others) or len(mover.outputs) != 1:
        return False  # reads the Cast at another input too
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


def add_into_range(graph: ir.Graph, add: ir.Node) -> bool:
    out = add.outputs[0]
    for i in (0, 1):
        r, c = add.inputs[i], add.inputs[1 - i]
        rng = r.producer() if r is not None else None
        if rng is None or rng.op_type != "Range" or not _default(rng) or rng.graph is not graph:
            continue
        if len(list(r.uses())) != 1 or r.is_graph_output() or c is None or c.shape is None or len(c.shape):
            continue
        if r.dtype not in _INTS or c.dtype != r.dtype or out.dtype != r.dtype:
            continue
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
    return False


def run(model: ir.Model) -> int:
    graph, changed = model.graph, 0
    for _ in range(_MAX_ROUNDS):
        step = 0
        for node in list(graph):
            if node.graph is not graph or not _default(node):
                continue
            if node.op_type == "Cast" and node.inputs and node.inputs[0] is not None:
                step += sink_cast(graph, node)
            elif node.op_type == "Add" and len(node.inputs) == 2:
                step += add_into_range(graph, node)
        changed += step
        if not step:
            break
    return changed
