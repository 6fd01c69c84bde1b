"""Sequence and optional ops over structures known at build time (codegen/nested.py): the lists are
rearranged while lowering; only ConcatFromSequence and SplitToSequence move data (Concat / Slice kernels).
Positions and split sizes must be known at build time (shape arithmetic); SequenceMap's body is lowered
once per element."""

from __future__ import annotations

from onnx.helper import tensor_dtype_to_np_dtype

from ... import dims as D
from ..context import LowerContext
from ..nested import OptValue, SeqValue, unwrap
from ..program import Tensor
from ..registry import lowering
from .helpers import normalize_axis
from .movement import lower_concat, slice_to


class _Sub(LowerContext):
    """A lowering context over given inputs and attributes, to reuse another op's lowering (Concat)."""

    def __init__(self, ctx: LowerContext, inputs: list, n_outputs: int, attrs: dict):
        self.__dict__.update(ctx.__dict__)
        self.inputs, self.outputs, self._attrs = list(inputs), [None] * n_outputs, attrs

    def attr(self, name: str, default=None):
        return self._attrs.get(name, default)


def _structure(ctx, i: int, value) -> None:
    """An output that only rearranges what exists (no data moves): a view."""
    ctx.where = "view"
    ctx._set(i, value)


def _seq(ctx, i: int) -> SeqValue:
    v = unwrap(ctx.inputs[i])
    if not isinstance(v, SeqValue):
        raise ctx.unsupported(f"input {i} is not a sequence")
    return v


def _position(ctx, i: int, length: int, default: int, insert: bool = False) -> int:
    if not ctx.has_input(i):
        return default
    vals = ctx.host_ints(i)
    if vals is None or len(vals) != 1 or not isinstance(vals[0], int):
        raise ctx.unsupported("the position must be known at build time")
    pos = vals[0] + length if vals[0] < 0 else vals[0]
    if not 0 <= pos <= length - (0 if insert else 1):
        raise ctx.unsupported(f"position {vals[0]} is outside a sequence of {length}")
    return pos


def _view(ctx, t: Tensor, shape) -> Tensor:
    """``t`` with another shape of the same elements (no copy)."""
    if t.value is not None:
        return ctx._l.constant(t.value.reshape([int(d) for d in shape]))
    return ctx._l.program.new_tensor(t.dtype, tuple(shape), alias=ctx.gpu(t))


@lowering("SequenceConstruct")
def lower_sequence_construct(ctx) -> None:
    items = [t for t in ctx.inputs if t is not None]
    if len({t.dtype for t in items}) > 1:
        raise ctx.unsupported("elements of different types")
    _structure(ctx, 0, SeqValue(items))


@lowering("SequenceEmpty")
def lower_sequence_empty(ctx) -> None:
    _structure(ctx, 0, SeqValue([], dtype=tensor_dtype_to_np_dtype(ctx.attr("dtype", 1)).name))


@lowering("SequenceAt")
def lower_sequence_at(ctx) -> None:
    seq = _seq(ctx, 0)
    _structure(ctx, 0, seq[_position(ctx, 1, len(seq), 0)])


@lowering("SequenceInsert")
def lower_sequence_insert(ctx) -> None:
    seq, t = _seq(ctx, 0), ctx.inputs[1]
    pos = _position(ctx, 2, len(seq), len(seq), insert=True)
    _structure(ctx, 0, SeqValue([*seq[:pos], t, *seq[pos:]], dtype=seq.dtype or t.dtype))


@lowering("SequenceErase")
def lower_sequence_erase(ctx) -> None:
    seq = _seq(ctx, 0)
    pos = _position(ctx, 1, len(seq), len(seq) - 1)
    _structure(ctx, 0, SeqValue([*seq[:pos], *seq[pos + 1:]], dtype=seq.dtype))


@lowering("SequenceLength")
def lower_sequence_length(ctx) -> None:
    ctx.set_host(0, "int64", (), [len(_seq(ctx, 0))])


@lowering("ConcatFromSequence")
def lower_concat_from_sequence(ctx) -> None:
    seq = _seq(ctx, 0)
    if not seq:
        raise ctx.unsupported("concatenating an empty sequence")
    axis = int(ctx.attr("axis"))
    ctx._set(0, stack(ctx, list(seq), axis) if ctx.attr("new_axis", 0) else concat(ctx, list(seq), axis))


def concat(ctx, items: list[Tensor], axis: int) -> Tensor:
    """Concat's lowering over a list of tensors."""
    sub = _Sub(ctx, items, 1, {"axis": axis})
    lower_concat(sub)
    ctx.where = sub.where
    return sub.outputs[0]


def stack(ctx, items: list[Tensor], axis: int = 0) -> Tensor:
    """The tensors stacked along a new axis."""
    axis = normalize_axis(axis, items[0].rank + 1)
    return concat(ctx, [_view(ctx, t, (*t.shape[:axis], 1, *t.shape[axis:])) for t in items], axis)


@lowering("SplitToSequence")
def lower_split_to_sequence(ctx) -> None:
    x = ctx.inputs[0]
    axis = normalize_axis(ctx.attr("axis", 0), x.rank)
    dim = x.shape[axis]
    if not ctx.has_input(1):
        sizes, squeeze = [1] * _static(ctx, dim), not ctx.attr("keepdims", 1)
    else:
        split = ctx.host_ints(1)
        if split is None:
            raise ctx.unsupported("split sizes must be known at build time")
        squeeze = False
        if ctx.inputs[1].rank == 0:  # equal pieces of that size, the last one smaller
            chunk, total = split[0], _static(ctx, dim)
            sizes = [min(chunk, total - k) for k in range(0, total, chunk)]
        else:
            sizes = list(split)
    sub = _Sub(ctx, [x], len(sizes), {})
    first = 0
    for i, size in enumerate(sizes):
        starts, lengths = [0] * x.rank, list(x.shape)
        starts[axis], lengths[axis] = first, size
        slice_to(sub, i, x, starts, lengths, [1] * x.rank)
        first = D.add(first, size)
    pieces = sub.outputs
    if squeeze:
        pieces = [_view(ctx, t, (*t.shape[:axis], *t.shape[axis + 1:])) for t in pieces]
    ctx.where = sub.where
    ctx._set(0, SeqValue(pieces, dtype=x.dtype))


def _static(ctx, dim) -> int:
    if not isinstance(dim, int):
        raise ctx.unsupported("splitting a symbolic axis into a sequence")
    return dim


@lowering("SequenceMap")
def lower_sequence_map(ctx) -> None:
    body = ctx.node.attributes["body"].value
    args = [unwrap(t) for t in ctx.inputs]
    n = len(_seq(ctx, 0))
    results: list[list] = [[] for _ in body.outputs]
    for i in range(n):
        inputs = [a[i] if isinstance(a, SeqValue) else a for a in args]
        for j, t in enumerate(ctx._l.lower_subgraph(body, inputs, conditional=False)):
            results[j].append(t)
    for j, (items, v) in enumerate(zip(results, body.outputs)):
        dtype = v.dtype.numpy().name if v.dtype is not None else None
        ctx._set(j, SeqValue(items, dtype=dtype))


@lowering("Optional")
def lower_optional(ctx) -> None:
    _structure(ctx, 0, OptValue(ctx.inputs[0] if ctx.has_input(0) else None))


@lowering("OptionalHasElement")
def lower_optional_has_element(ctx) -> None:
    present = ctx.has_input(0) and unwrap(ctx.inputs[0]) is not None
    ctx.set_host(0, "bool", (), [int(present)])


@lowering("OptionalGetElement")
def lower_optional_get_element(ctx) -> None:
    value = unwrap(ctx.inputs[0])
    if value is None:
        raise ctx.unsupported("the optional is empty")
    _structure(ctx, 0, value)
