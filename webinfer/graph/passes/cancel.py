"""Cancel or merge adjacent pairs (rules): Cast->Cast, Reshape->Reshape, Transpose->Transpose, Unsqueeze->Squeeze.

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
from .rules import Match, Rule, apply

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


def _pair(op: str):
    """The pattern ``op`` -> anchor: the producer of the anchor's data input is an ``op`` of the default domain."""
    def pattern(node: ir.Node) -> Match | None:
        if not node.inputs or node.inputs[0] is None:
            return None
        prev = node.inputs[0].producer()
        if prev is None or prev.op_type != op or prev.domain != "" or prev.graph is not node.graph:
            return None
        return Match([prev, node], {"first": prev, "second": node})
    return pattern


def _bypass(model: ir.Model, m: Match) -> bool:
    """The pair is an identity: its output becomes the first node's input."""
    graph, first, second = model.graph, m["first"], m["second"]
    if not replace_value(graph, second.outputs[0], first.inputs[0]):
        return False
    graph.remove(second, safe=True)
    remove_if_dead(graph, first)
    return True


def _rewire(model: ir.Model, m: Match) -> bool:
    """The pair merges: the second node reads the first node's input directly."""
    m["second"].replace_input_with(0, m["first"].inputs[0])
    remove_if_dead(model.graph, m["first"])
    return True


def _bypass_or_rewire(model: ir.Model, m: Match) -> bool:
    """Per the condition's verdict (``identity``): drop the pair, or merge it after ``edit`` (if any)."""
    if m["identity"]:
        return _bypass(model, m)
    if m.get("edit") is not None:
        m["edit"](model.graph)
    return _rewire(model, m)


def _cast_cast(m: Match) -> bool:
    """Cast(Cast(x, T1), T2) == Cast(x, T2) when x -> T1 is lossless; an identity when T2 is x's type."""
    first, second = m["first"], m["second"]
    src = first.inputs[0].dtype
    if src is None or not lossless(src, T(int_attr(first, "to", 0))):
        return False
    m.values["identity"] = T(int_attr(second, "to", 0)) == src
    return True


def _single(node: ir.Node) -> Match:
    return Match([node], {"node": node})


def _cast_noop(m: Match) -> bool:
    """A Cast to the type its input already has."""
    node = m["node"]
    return node.inputs[0].dtype is not None and T(int_attr(node, "to", 0)) == node.inputs[0].dtype


def _drop(model: ir.Model, m: Match) -> bool:
    node = m["node"]
    if not replace_value(model.graph, node.outputs[0], node.inputs[0]):
        return False
    model.graph.remove(node, safe=True)
    return True


def _reshape_reshape(m: Match) -> bool:
    """Reshape(Reshape(x, s1), s2) -> Reshape(x, s2), or x when the result has x's static shape.

    A 0 in s2 (allowzero=0) copies a dim of the intermediate, so it is replaced by that dim when known.
    """
    first, node = m["first"], m["second"]
    x, mid, out = first.inputs[0], node.inputs[0], node.outputs[0]
    m.values["identity"] = static_dims(x) is not None and static_dims(x) == static_dims(out)
    if m["identity"]:
        return True
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
        m.values["edit"] = lambda graph: node.replace_input_with(
            1, new_initializer(graph, shape, f"{out.name or 'reshape'}_shape"))
    return True


def _transpose_transpose(m: Match) -> bool:
    """Transpose(Transpose(x, p1), p2) -> Transpose(x, p1[p2]); x when p1[p2] is the identity."""
    first, node = m["first"], m["second"]
    r = rank(first.inputs[0])
    p1, p2 = ints_attr(first, "perm"), ints_attr(node, "perm")
    if (p1 is None or p2 is None) and r is None:
        return False
    p1 = p1 if p1 is not None else list(range(r))[::-1]
    p2 = p2 if p2 is not None else list(range(len(p1)))[::-1]
    perm = [p1[i] for i in p2]
    m.values["identity"] = perm == list(range(len(perm)))
    m.values["edit"] = lambda graph: node.attributes.__setitem__("perm", ir.AttrInt64s("perm", perm))
    return True


def _axes(node: ir.Node) -> list[int] | None:
    """Unsqueeze/Squeeze axes from the input (opset >= 13) or the attribute (older)."""
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        value = const(node.inputs[1])
        return None if value is None else [int(a) for a in value.reshape(-1)]
    return ints_attr(node, "axes")


def _unsqueeze_squeeze(m: Match) -> bool:
    """Squeeze(Unsqueeze(x, a), a) -> x: the axes are compared after resolving negative ones."""
    first, node = m["first"], m["second"]
    added, removed = _axes(first), _axes(node)
    if added is None or removed is None:  # Squeeze without axes drops every 1: only safe if shapes known
        return False
    r = rank(first.inputs[0])
    mid_rank = r + len(added) if r is not None else None
    if any(a < 0 for a in added + removed) and mid_rank is None:
        return False

    def norm(axes):
        return sorted(a + mid_rank if a < 0 else a for a in axes)

    return norm(added) == norm(removed)


CAST_NOOP = Rule("cast_noop", ("Cast",), _single, _cast_noop, _drop, domains=("",))
CAST_CAST = Rule("cast_cast", ("Cast",), _pair("Cast"), _cast_cast, _bypass_or_rewire, domains=("",))
RESHAPE_RESHAPE = Rule("reshape_reshape", ("Reshape",), _pair("Reshape"), _reshape_reshape, _bypass_or_rewire,
                       domains=("",))
TRANSPOSE_TRANSPOSE = Rule("transpose_transpose", ("Transpose",), _pair("Transpose"), _transpose_transpose,
                           _bypass_or_rewire, domains=("",))
UNSQUEEZE_SQUEEZE = Rule("unsqueeze_squeeze", ("Squeeze",), _pair("Unsqueeze"), _unsqueeze_squeeze, _bypass,
                         domains=("",))
RULES = (CAST_NOOP, CAST_CAST, RESHAPE_RESHAPE, TRANSPOSE_TRANSPOSE, UNSQUEEZE_SQUEEZE)


def run(model: ir.Model) -> int:
    before = model.graph.num_nodes()
    apply(model, RULES, rounds=None)
    return before - model.graph.num_nodes()
