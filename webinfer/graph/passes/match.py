"""Matching helpers the rules share (graph/passes/rules.py): how a pattern walks from node to node and
recognises a constant. Graph edits (replace, install, new initializers) are in ``_util``."""

from __future__ import annotations

import onnx_ir as ir

from ._program import scalar
from ._util import const, int_attr, ints_attr, sole_consumer

TOL = 1e-4  # relative tolerance of a recognised constant (exporters round sqrt(2), 1/sqrt(2), ...)


def is_op(node: ir.Node | None, op: str) -> bool:
    """``node`` is the ONNX op ``op``."""
    return node is not None and node.domain in ("", "ai.onnx") and node.op_type == op


def other(node: ir.Node | None, value: ir.Value) -> ir.Value | None:
    """The other input of a binary node that reads ``value`` (None if not binary or reads it twice)."""
    if node is None or len(node.inputs) != 2 or (node.inputs[0] is value) == (node.inputs[1] is value):
        return None
    return node.inputs[1] if node.inputs[0] is value else node.inputs[0]


def near(v: float | None, want: float) -> bool:
    return v is not None and abs(v - want) <= TOL * abs(want)


def in_order(graph: ir.Graph, members: list[ir.Node]) -> list[ir.Node]:
    """``members`` in graph order (a replacement goes where the last of them was)."""
    wanted = {id(m) for m in members}
    return [n for n in graph if id(n) in wanted]


def scaled(value: ir.Value | None, c: float) -> tuple[ir.Node, ir.Value] | None:
    """``value`` = Mul(y, c) in either order: (the Mul, y)."""
    node = value.producer() if value is not None else None
    if not is_op(node, "Mul"):
        return None
    for i in (0, 1):
        if near(scalar(node.inputs[1 - i]), c):
            return node, node.inputs[i]
    return None


def square_of(node: ir.Node | None, x: ir.Value) -> bool:
    """``node`` computes x^2, as Pow(x, 2) or Mul(x, x)."""
    if is_op(node, "Pow"):
        return node.inputs[0] is x and near(scalar(node.inputs[1]), 2.0)
    return is_op(node, "Mul") and node.inputs[0] is x and node.inputs[1] is x


def reduce_axes(node: ir.Node) -> list[int] | None:
    """A Reduce* node's constant axes, from its attribute (old opsets) or its input 1."""
    axes = ints_attr(node, "axes")
    if axes is None and len(node.inputs) > 1:
        c = const(node.inputs[1])
        axes = None if c is None else [int(a) for a in c.reshape(-1)]
    return axes


def last_axis_mean(node: ir.Node | None, x: ir.Value) -> bool:
    """ReduceMean of ``x`` over its last axis only, keeping dims."""
    if not is_op(node, "ReduceMean") or node.inputs[0] is not x or int_attr(node, "keepdims", 1) != 1:
        return False
    axes = reduce_axes(node)
    rank = len(x.shape) if x.shape is not None else None
    return axes is not None and len(axes) == 1 and rank is not None and axes[0] in (-1, rank - 1)


def const_vector(value: ir.Value | None, n) -> bool:
    """A float constant of ``n`` elements along its last axis."""
    c = const(value) if value is not None else None
    return c is not None and isinstance(n, int) and c.size == n and c.shape[-1:] == (n,) and c.dtype.kind == "f"


__all__ = ["TOL", "const_vector", "in_order", "is_op", "last_axis_mean", "near", "other", "reduce_axes",
           "scaled", "sole_consumer", "square_of"]
