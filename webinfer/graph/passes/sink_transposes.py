"""Sink a Transpose that keeps the last axis below the row-local ops after it.

Exporters often transpose a tensor and then normalise its rows, as Gemma 3's q/k norm does:
``Transpose(0, 2, 1, 3) -> RMS norm over the head dim -> rotary -> attention``. Every op of such a region
works along the last axis only (elementwise ops with constants that vary along that axis alone, reductions
over it with keepdims, Layer/RMS normalisation on it), so it gives the same rows in either layout. Moving
the Transpose below the region puts it right before the op that reads the layout (the rotary, the
attention, a matmul), where the KV-cache rewrite and the matmul strides absorb it, and it lets the norm be
matched as one op in the layout its producer wrote.

The Transpose moves only when every reader of its output is in the region, the region has one exit value
and holds a reduction or a norm (a purely elementwise region gains nothing: the elementwise fusion already
reads through the transpose). A scalar or unary tail after the last reduction (a scale on q) stays after
the moved Transpose, where the attention matcher expects it.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ._util import const, int_attr, ints_attr, remove_if_dead

_UNARY = {"Abs", "Cast", "Ceil", "Cos", "Erf", "Exp", "Floor", "Identity", "Log", "Neg", "Reciprocal", "Relu",
          "Round", "Sigmoid", "Sign", "Sin", "Softplus", "Sqrt", "Tanh", "Gelu", "HardSigmoid", "LeakyRelu", "Elu",
          "Selu", "Celu", "Mish", "HardSwish", "Softsign"}
_BINARY = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"}
_REDUCE = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceSumSquare", "ReduceL2", "ReduceL1",
           "ReduceProd", "ReduceLogSumExp"}
_NORMS = {"LayerNormalization", "RMSNormalization"}


def _keeps_last_axis(node: ir.Node) -> list[int] | None:
    perm = ints_attr(node, "perm")
    if node.op_type != "Transpose" or node.domain not in ("", "ai.onnx") or perm is None or len(perm) < 2:
        return None
    return perm if perm[-1] == len(perm) - 1 and perm != list(range(len(perm))) else None


def _row_constant(value: ir.Value | None, rank: int) -> bool:
    """A constant that varies along the last axis only (a scalar, a [d] vector, a [1, .., 1, d] tensor)."""
    c = const(value)
    return c is not None and c.ndim <= rank and all(n == 1 for n in c.shape[:-1])


def _last_axis(axes, rank: int) -> bool:
    return axes is not None and len(axes) == 1 and int(axes[0]) in (-1, rank - 1)


def _row_op(node: ir.Node, inside: set, rank: int) -> str | None:
    """'elementwise', 'reduce' or 'norm' when ``node`` works along the last axis only, given the region's values
    ``inside``; None otherwise."""
    if node.domain not in ("", "ai.onnx") or any(o.is_graph_output() for o in node.outputs):
        return None
    ins = node.inputs
    if node.op_type in _UNARY and len(ins) == 1 and ins[0] in inside:
        return "elementwise"
    if node.op_type in _BINARY and len(ins) == 2 and any(v in inside for v in ins):
        return "elementwise" if all(v in inside or _row_constant(v, rank) for v in ins) else None
    if node.op_type in _REDUCE and ins and ins[0] in inside and int_attr(node, "keepdims", 1) == 1:
        axes = const(ins[1]) if len(ins) > 1 and ins[1] is not None else ints_attr(node, "axes")
        axes = None if axes is None else np.asarray(axes).reshape(-1).tolist()
        return "reduce" if _last_axis(axes, rank) else None
    if node.op_type in _NORMS and ins and ins[0] in inside and int_attr(node, "axis", -1) in (-1, rank - 1):
        if any(o.uses() or o.is_graph_output() for o in node.outputs[1:]):
            return None
        return "norm" if all(_row_constant(v, rank) for v in ins[1:] if v is not None) else None
    return None


def _region(y: ir.Value, rank: int) -> tuple[list[ir.Node], dict[int, str]]:
    """The row-local nodes reachable from ``y`` (in graph order of discovery) and their kinds."""
    inside, nodes, kinds = {y}, [], {}
    grew = True
    while grew:
        grew = False
        for v in list(inside):
            for use in v.uses():
                n = use.node
                if id(n) in kinds:
                    continue
                kind = _row_op(n, inside, rank)
                if kind is not None:
                    kinds[id(n)] = kind
                    nodes.append(n)
                    inside.update(n.outputs)
                    grew = True
    return nodes, kinds


def _exits(nodes: list[ir.Node], y: ir.Value) -> list[ir.Value]:
    members = {id(n) for n in nodes}
    values = [y] + [o for n in nodes for o in n.outputs]
    return [v for v in values if v.is_graph_output() or any(id(u.node) not in members for u in v.uses())]


def _trim(nodes: list[ir.Node], kinds: dict, exit_value: ir.Value) -> ir.Value:
    """Leave a unary / scalar-constant tail after the last reduction or norm outside the region."""
    while True:
        node = exit_value.producer()
        if node is None or kinds.get(id(node)) != "elementwise":
            return exit_value
        region_inputs = [v for v in node.inputs if v is not None and const(v) is None]
        scalars = all(const(v) is None or const(v).size == 1 for v in node.inputs if v is not None)
        if len(region_inputs) != 1 or not scalars:
            return exit_value
        prev = region_inputs[0]
        if len(list(prev.uses())) != 1:
            return exit_value
        nodes.remove(node)
        del kinds[id(node)]
        exit_value = prev


def _sink(graph: ir.Graph, t: ir.Node, perm: list[int]) -> bool:
    x, y = t.inputs[0], t.outputs[0]
    if x is None or y.is_graph_output() or not y.uses():
        return False
    nodes, kinds = _region(y, len(perm))
    members = {id(n) for n in nodes}
    if any(id(u.node) not in members for u in y.uses()):
        return False
    exits = _exits(nodes, y)
    if len(exits) != 1 or exits[0] is y:
        return False
    exit_value = _trim(nodes, kinds, exits[0])
    if exit_value is y or not any(k in ("reduce", "norm") for k in kinds.values()):
        return False
    # the region now computes in x's layout: shapes go back through the inverse permutation
    inverse = list(np.argsort(perm))
    for n in nodes:
        for o in n.outputs:
            if o.shape is not None and len(o.shape) == len(perm):
                o.shape = ir.Shape([o.shape[i] for i in inverse])
    for use in list(y.uses()):
        use.node.replace_input_with(use.idx, x)
    moved = ir.Node("", "Transpose", [exit_value], attributes=[ir.AttrInt64s("perm", perm)],
                    name=(t.name or "transpose") + "_sunk", num_outputs=1)
    out = moved.outputs[0]
    out.dtype = exit_value.dtype
    if exit_value.shape is not None and len(exit_value.shape) == len(perm):
        out.shape = ir.Shape([exit_value.shape[i] for i in perm])
    for use in list(exit_value.uses()):
        if use.node is not moved:
            use.node.replace_input_with(use.idx, out)
    graph.insert_after(exit_value.producer(), moved)
    remove_if_dead(graph, t)
    return True


def run(model: ir.Model) -> int:
    graph, moved = model.graph, 0
    for node in list(graph):
        if node.graph is not graph:
            continue
        perm = _keeps_last_axis(node)
        if perm is not None and _sink(graph, node, perm):
            moved += 1
    return moved
