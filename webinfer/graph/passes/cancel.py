"""Cancel or merge adjacent pairs: Cast->Cast, Reshape->Reshape, Transpose->Transpose, Unsqueeze->Squeeze.

Each rule looks at a second node whose data input is produced by a first node of the matching kind.
It either replaces the second node's output by the first node's input (the pair is an identity), or
rewires the second node to read the first node's input (the pair merges into one node). The first
node is removed once nobody reads it any more. Rules repeat until nothing changes, so chains collapse.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ._util import (
    const,
    int_attr,
    ints_attr,
    new_initializer,
    rank,
    remove_if_dead,
    replace_value,
    static_dims,
)

T = ir.DataType
_SIGNED = [T.INT8, T.INT16, T.INT32, T.INT64]
_UNSIGNED = [T.UINT8, T.UINT16, T.UINT32, T.UINT64]
_FLOATS = [T.FLOAT16, T.FLOAT, T.DOUBLE]
# (from, to) pairs where every value of `from` is exactly representable in `to`.
_LOSSLESS = {(a, b) for chain in (_SIGNED, _UNSIGNED, _FLOATS) for i, a in enumerate(chain) for b in chain[i + 1:]}
_LOSSLESS |= {(T.UINT8, T.INT16), (T.UINT8, T.INT32), (T.UINT8, T.INT64), (T.UINT16, T.INT32),
              (T.UINT16, T.INT64), (T.UINT32, T.INT64), (T.BFLOAT16, T.FLOAT), (T.BFLOAT16, T.DOUBLE)}
_LOSSLESS |= {(a, f) for a in (T.INT8, T.UINT8) for f in _FLOATS}
_LOSSLESS |= {(a, f) for a in (T.INT16, T.UINT16) for f in (T.FLOAT, T.DOUBLE)}
_LOSSLESS |= {(a, T.DOUBLE) for a in (T.INT32, T.UINT32)}
_LOSSLESS |= {(T.BOOL, b) for b in _SIGNED + _UNSIGNED + _FLOATS + [T.BFLOAT16]}


def lossless(src: ir.DataType | None, dst: ir.DataType) -> bool:
    return src is not None and (src == dst or (src, dst) in _LOSSLESS)


def _first(node: ir.Node, op: str) -> ir.Node | None:
    """The producer of ``node``'s data input when it is an ``op`` of the default domain."""
    if not node.inputs or node.inputs[0] is None:
        return None
    prev = node.inputs[0].producer()
    if prev is None or prev.op_type != op or prev.domain != "" or prev.graph is not node.graph:
        return None
    return prev


def _bypass(graph: ir.Graph, second: ir.Node, first: ir.Node) -> bool:
    """The pair is an identity: its output becomes the first node's input."""
    if not replace_value(graph, second.outputs[0], first.inputs[0]):
        return False
    graph.remove(second, safe=True)
    remove_if_dead(graph, first)
    return True


def _rewire(graph: ir.Graph, second: ir.Node, first: ir.Node) -> bool:
    """The pair merges: the second node reads the first node's input directly."""
    second.replace_input_with(0, first.inputs[0])
    remove_if_dead(graph, first)
    return True


def cast_cast(graph: ir.Graph, node: ir.Node) -> bool:
    """Cast(Cast(x, T1), T2) == Cast(x, T2) when x -> T1 is lossless; an identity when T2 is x's type."""
    first = _first(node, "Cast")
    if first is None or node.op_type != "Cast":
        return False
    src = first.inputs[0].dtype
    mid, dst = int_attr(first, "to", 0), int_attr(node, "to", 0)
    if src is None or not lossless(src, T(mid)):
        return False
    if T(dst) == src:
        return _bypass(graph, node, first)
    return _rewire(graph, node, first)


def cast_noop(graph: ir.Graph, node: ir.Node) -> bool:
    """Cast to the type the input already has."""
    if node.op_type != "Cast" or node.inputs[0].dtype is None or T(int_attr(node, "to", 0)) != node.inputs[0].dtype:
        return False
    if not replace_value(graph, node.outputs[0], node.inputs[0]):
        return False
    graph.remove(node, safe=True)
    return True


def reshape_reshape(graph: ir.Graph, node: ir.Node) -> bool:
    """Reshape(Reshape(x, s1), s2) -> Reshape(x, s2), or x when the result has x's static shape.

    A 0 in s2 (allowzero=0) copies a dim of the intermediate, so it is replaced by that dim when known.
    """
    first = _first(node, "Reshape")
    if node.op_type != "Reshape" or first is None:
        return False
    x, mid, out = first.inputs[0], node.inputs[0], node.outputs[0]
    if static_dims(x) is not None and static_dims(x) == static_dims(out):
        return _bypass(graph, node, first)
    shape = const(node.inputs[1])
    if shape is None:
        return False
    if int_attr(node, "allowzero", 0) == 0 and (shape == 0).any():
        mid_dims = mid.shape.dims if mid.shape is not None else ()
        zeros = np.flatnonzero(shape == 0)
        if zeros.max() >= len(mid_dims) or not all(isinstance(mid_dims[i], int) for i in zeros):
            return False
        shape = shape.copy()
        shape[zeros] = [mid_dims[i] for i in zeros]
        node.replace_input_with(1, new_initializer(graph, shape, f"{out.name or 'reshape'}_shape"))
    return _rewire(graph, node, first)


def transpose_transpose(graph: ir.Graph, node: ir.Node) -> bool:
    """Transpose(Transpose(x, p1), p2) -> Transpose(x, p1[p2]); x when p1[p2] is the identity."""
    first = _first(node, "Transpose")
    if node.op_type != "Transpose" or first is None:
        return False
    r = rank(first.inputs[0])
    p1, p2 = ints_attr(first, "perm"), ints_attr(node, "perm")
    if (p1 is None or p2 is None) and r is None:
        return False
    p1 = p1 if p1 is not None else list(range(r))[::-1]
    p2 = p2 if p2 is not None else list(range(len(p1)))[::-1]
    perm = [p1[i] for i in p2]
    if perm == list(range(len(perm))):
        return _bypass(graph, node, first)
    node.attributes["perm"] = ir.AttrInt64s("perm", perm)
    return _rewire(graph, node, first)


def _axes(node: ir.Node) -> list[int] | None:
    """Unsqueeze/Squeeze axes from the input (opset >= 13) or the attribute (older)."""
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        value = const(node.inputs[1])
        return None if value is None else [int(a) for a in value.reshape(-1)]
    return ints_attr(node, "axes")


def unsqueeze_squeeze(graph: ir.Graph, node: ir.Node) -> bool:
    """Squeeze(Unsqueeze(x, a), a) -> x: the axes are compared after resolving negative ones."""
    first = _first(node, "Unsqueeze")
    if node.op_type != "Squeeze" or first is None:
        return False
    added, removed = _axes(first), _axes(node)
    if added is None or removed is None:  # Squeeze without axes drops every 1: only safe if shapes known
        return False
    r = rank(first.inputs[0])
    mid_rank = r + len(added) if r is not None else None
    if any(a < 0 for a in added + removed) and mid_rank is None:
        return False
    def norm(axes):
        return sorted(a + mid_rank if a < 0 else a for a in axes)

    if norm(added) != norm(removed):
        return False
    return _bypass(graph, node, first)


RULES = (cast_noop, cast_cast, reshape_reshape, transpose_transpose, unsqueeze_squeeze)


def run(model: ir.Model) -> int:
    graph = model.graph
    before = graph.num_nodes()
    changed = True
    while changed:
        changed = False
        for node in list(graph):
            if node.graph is not graph or node.domain != "":
                continue
            for rule in RULES:
                if rule(graph, node):
                    changed = True
                    break
    return before - graph.num_nodes()
