"""Helpers shared by the passes: constant lookup, value replacement, node counting."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir


def count_nodes(model: ir.Model) -> int:
    """Nodes of the main graph (subgraphs are not rewritten by our own passes)."""
    return model.graph.num_nodes()


def const(value: ir.Value | None) -> np.ndarray | None:
    """The numpy value of an initializer or a Constant node's output, else None.

    An initializer that is also a graph input can be overridden by the caller: not a constant.
    """
    if value is None or value.is_graph_input():
        return None
    if value.const_value is not None:
        return value.const_value.numpy()
    node = value.producer()
    if node is not None and node.op_type == "Constant" and node.domain == "" and "value" in node.attributes:
        return node.attributes["value"].as_tensor().numpy()
    return None


def int_attr(node: ir.Node, name: str, default: int) -> int:
    a = node.attributes.get(name)
    return default if a is None else a.as_int()


def ints_attr(node: ir.Node, name: str) -> list[int] | None:
    a = node.attributes.get(name)
    return None if a is None else list(a.as_ints())


def rank(value: ir.Value) -> int | None:
    return None if value.shape is None else len(value.shape)


def static_dims(value: ir.Value) -> tuple[int, ...] | None:
    if value.shape is None or not all(isinstance(d, int) for d in value.shape.dims):
        return None
    return tuple(value.shape.dims)


def same_known_shape(a: ir.Shape | None, b: ir.Shape | None) -> bool:
    """Both shapes fully known and equal dim by dim (named symbolic dims by name)."""
    if a is None or b is None or len(a) != len(b):
        return False
    for x, y in zip(a.dims, b.dims):
        if isinstance(x, int) or isinstance(y, int):
            if x != y:
                return False
        elif x.value is None or x.value != y.value:
            return False
    return True


def sole_consumer(value: ir.Value) -> ir.Node | None:
    """The one node using ``value`` (once), when it is not also a graph output."""
    uses = list(value.uses())
    if len(uses) != 1 or value.is_graph_output():
        return None
    return uses[0].node


def replace_value(graph: ir.Graph, old: ir.Value, new: ir.Value) -> bool:
    """Make every user of ``old`` (graph outputs included) use ``new``; False when impossible.

    A graph output keeps its name: ``new`` takes it over, so the model's interface is unchanged.
    That is impossible when ``new`` is itself a graph input, output or initializer (its name is
    fixed), in which case nothing is changed.
    """
    if old is new:
        return False
    if old.is_graph_output():
        if new.is_graph_input() or new.is_graph_output() or new.is_initializer():
            return False
        name = old.name
        new.type = new.type or old.type  # a graph output must keep its declared type
        new.shape = new.shape or old.shape
        old.replace_all_uses_with(new, replace_graph_outputs=True)
        old.name = None
        new.name = name
        return True
    old.replace_all_uses_with(new)
    return True


def install(graph: ir.Graph, node: ir.Node, before: ir.Node, replaced: list[ir.Value], removed: list[ir.Node]) -> None:
    """Insert a fused ``node`` before ``before``; its outputs take the place (users, dtype, shape) of
    ``replaced``, one for one, and the ``removed`` nodes, unused by then, go."""
    graph.insert_before(before, node)
    for new, old in zip(node.outputs, replaced):
        new.dtype, new.shape = old.dtype, old.shape
        replace_value(graph, old, new)
    for n in removed:
        graph.remove(n, safe=True)


def remove_if_dead(graph: ir.Graph, node: ir.Node | None) -> int:
    """Remove ``node`` when none of its outputs is used any more; returns 1 if removed."""
    if node is None or node.graph is not graph:
        return 0
    if any(o.uses() or o.is_graph_output() for o in node.outputs):
        return 0
    graph.remove(node, safe=True)
    return 1


def new_initializer(graph: ir.Graph, array: np.ndarray, hint: str) -> ir.Value:
    """Register ``array`` as a fresh initializer whose name does not clash with an existing one."""
    name, i = hint, 0
    while name in graph.initializers:
        i += 1
        name = f"{hint}_{i}"
    value = ir.Value(name=name, shape=ir.Shape(array.shape), type=ir.TensorType(ir.DataType.from_numpy(array.dtype)),
                     const_value=ir.tensor(array, name=name))
    graph.register_initializer(value)
    return value


def onnx_op(value: ir.Value | None, op: str) -> ir.Node | None:
    """The node producing ``value`` when it is the ONNX op ``op``."""
    node = value.producer() if value is not None else None
    return node if node is not None and node.op_type == op and node.domain in ("", "ai.onnx") else None


def constant_projection(x: ir.Value) -> tuple[ir.Value, np.ndarray, np.ndarray | None] | None:
    """x = MatMul(a, W) [+ bias], W a constant float matrix, bias a constant vector of its columns, every
    intermediate used once: (a, W, bias)."""
    if sole_consumer(x) is None:
        return None
    add, mm, bias = onnx_op(x, "Add"), onnx_op(x, "MatMul"), None
    if add is not None:
        for i in (0, 1):
            mm, bias = onnx_op(add.inputs[i], "MatMul"), const(add.inputs[1 - i])
            if mm is not None and bias is not None and sole_consumer(mm.outputs[0]) is add:
                break
        else:
            return None
    w = const(mm.inputs[1]) if mm is not None else None
    if w is None or w.ndim != 2 or w.dtype.kind != "f" or (bias is not None and (bias.shape != (w.shape[1],)
                                                                                 or bias.dtype != w.dtype)):
        return None
    return mm.inputs[0], w, bias
