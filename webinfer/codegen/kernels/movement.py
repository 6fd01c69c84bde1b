"""Data movement: one generic index-remap kernel (``movement.wgsl.j2``) serves Transpose, Slice, Expand,
Concat, Split and Tile (and Pad, DepthToSpace, ... in ``layout.py``).

An op describes its output as per-axis :class:`Axis` records (extent, source stride, start, step, mode);
the kernel turns the output index into coordinates and the coordinates into a source offset. Small integer
tensors from shape arithmetic are moved on the host instead, as numpy object arrays of dims.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import dims as D
from ...dims import Dim, exact_div
from ...opschema import HOST_MAX_ELEMENTS
from .. import emit
from ..emit import wgsl_literal
from ..registry import lowering
from .helpers import broadcast_shapes, broadcast_strides, compute_type, contiguous_strides, normalize_axis

BIG = 2**31 - 1  # ONNX models write INT64_MAX / INT32_MAX for "to the end"
RANK_BUCKET = 4  # plain remaps of 2-4 axes all walk 4 (fewer distinct shaders, remap)


@dataclass
class Axis:
    """One axis of the iteration space: coordinate ``c`` reads source coordinate ``start + c*step``."""

    size: Dim  # extent of the iteration space along this axis
    stride: Dim = 0  # source elements per source coordinate
    start: Dim = 0
    step: Dim = 1
    mode: str = ""  # "" (in range by construction) | wrap | clamp | reflect | check (outside -> pad value)
    extent: Dim = 0  # source extent, for the modes
    dst: Dim = 0  # destination stride (only with an explicit destination map)


def remap(ctx, x, out, axes: list[Axis], *, dst_base: Dim | None = None, pad: str | None = None,
          reads_extra: dict | None = None) -> None:
    """Emit the remap kernel reading ``x`` into ``out``. Without ``dst_base`` the iteration space is
    ``out`` in order; with it, element ``c`` is written at ``dst_base + sum c*dst``."""
    n = D.product([a.size for a in axes])
    if n == 0:
        return
    base, axes = _simplify(axes, dst_base is not None)
    if 1 < len(axes) < RANK_BUCKET and dst_base is None and not any(a.mode for a in axes):
        # one shader for the plain walks of rank 2..4 (a [S, H, D] and a [B, H, S, D] transpose share a
        # pipeline); the leading size-1 axes cost a division each, their stride 1 keeps them uniforms
        axes = [Axis(1, 1)] * (RANK_BUCKET - len(axes)) + axes
    params: dict = {"n": n}
    for d, a in enumerate(axes):
        params[f"d{d}"] = a.size
        params[f"k{d}"] = ("i32", a.stride)
        if a.mode:
            params.update({f"t{d}": ("i32", a.step), f"a{d}": ("i32", a.start), f"e{d}": ("i32", a.extent)})
        if dst_base is not None:
            params[f"q{d}"] = ("i32", a.dst)
    params["base"] = ("i32", base)
    if dst_base is not None:
        params["dbase"] = emit.offset(dst_base)
    reads = {"x": ctx.gpu(x), **(reads_extra or {})}
    ctx.dispatch("movement.wgsl.j2", reads, {"out": out}, work=n, params=params, rank=len(axes),
                 modes=[a.mode for a in axes], dst=dst_base is not None, pad=pad or "")


def _simplify(axes: list[Axis], with_dst: bool) -> tuple[Dim, list[Axis]]:
    """Fold affine starts into one base offset, drop size-1 axes, merge neighbours that walk memory
    contiguously (fewer divisions per element). Returns (base, axes)."""
    base: Dim = 0
    flat: list[Axis] = []
    for a in axes:
        if a.mode:
            flat.append(a)
            continue
        base = D.add(base, D.mul(a.start, a.stride))
        if a.size != 1:
            flat.append(Axis(a.size, D.mul(a.step, a.stride), dst=a.dst))
    merged: list[Axis] = []
    for a in flat:
        prev = merged[-1] if merged else None
        if prev is not None and _mergeable(prev, a, with_dst):
            merged[-1] = Axis(prev.size * a.size, a.stride, dst=a.dst)
        else:
            merged.append(a)
    return base, merged


def _mergeable(outer: Axis, inner: Axis, with_dst: bool) -> bool:
    if outer.mode or inner.mode or not D.is_static([outer.size, inner.size, outer.stride, inner.stride,
                                                    outer.dst, inner.dst]):
        return False
    return outer.stride == inner.size * inner.stride and (not with_dst or outer.dst == inner.size * inner.dst)


def contiguous_axes(shape, strides=None) -> list[Axis]:
    """The identity walk over ``shape`` (given or contiguous strides)."""
    strides = strides if strides is not None else contiguous_strides(shape)
    return [Axis(d, s) for d, s in zip(shape, strides)]


def pad_literal(ctx, value, dtype: str) -> str:
    return wgsl_literal(value.item() if hasattr(value, "item") else value, compute_type(dtype))


# -- host shape arithmetic on small integer tensors ----------------------------------------------------
def host_array(ctx, i: int) -> np.ndarray | None:
    """Input ``i`` as a numpy object array of dims when it is a small int tensor known at build time."""
    t = ctx.inputs[i]
    if t is None or (t.sym is None and t.value is None) or not D.is_static(t.shape):
        return None
    vals = ctx.host_ints(i)
    if vals is None:
        return None
    arr = np.empty(len(vals), dtype=object)
    arr[:] = vals
    return arr.reshape([int(d) for d in t.shape])


def host_inputs(ctx, positions, out_shape) -> list[np.ndarray] | None:
    """Host arrays of the given inputs when all of them are host values, one is symbolic, and the
    result (``out_shape``) is small enough to stay on the host; None otherwise (the op runs on the GPU)."""
    if not D.is_static(out_shape) or D.product(out_shape) > HOST_MAX_ELEMENTS:
        return None
    arrs = [host_array(ctx, i) for i in positions]
    if any(a is None for a in arrs) or not any(ctx.inputs[i].sym is not None for i in positions):
        return None
    return arrs


def set_host_array(ctx, i: int, dtype: str, arr) -> None:
    if not isinstance(arr, np.ndarray):  # numpy returns a bare element for 0-d results
        arr, value = np.empty((), dtype=object), arr
        arr[()] = value
    ctx.set_host(i, dtype, arr.shape, [v if isinstance(v, D.Sym) else int(v) for v in arr.reshape(-1)])


# -- ops ------------------------------------------------------------------------------------------------
def transpose_axes(shape, perm, strides=None) -> list[Axis]:
    strides = strides if strides is not None else contiguous_strides(shape)
    return [Axis(shape[p], strides[p]) for p in perm]


@lowering("Transpose")
def lower_transpose(ctx) -> None:
    x = ctx.inputs[0]
    perm = ctx.attr("perm") or list(range(x.rank))[::-1]
    perm = [normalize_axis(p, x.rank, "perm") for p in perm]
    shape = [x.shape[p] for p in perm]
    if [p for p in perm if x.shape[p] != 1] == [p for p in range(x.rank) if x.shape[p] != 1]:
        ctx.set_alias(0, x, shape)  # only size-1 axes move: the memory order is unchanged
        return
    arrs = host_inputs(ctx, [0], shape)
    if arrs is not None:
        return set_host_array(ctx, 0, x.dtype, np.transpose(arrs[0], perm))
    remap(ctx, x, ctx.output(0, x.dtype, shape), transpose_axes(x.shape, perm))


def slice_bounds(ctx, start: Dim, end: Dim, step: int, dim: Dim) -> tuple[Dim, Dim]:
    """ONNX Slice clamping of one axis -> (first source coordinate, number of elements)."""
    lo, hi = (0, dim) if step > 0 else (-1, D.add(dim, -1))
    start = _clamp(ctx, start, dim, 0, hi, False)
    end = _clamp(ctx, end, dim, lo, hi, step > 0)
    span = D.add(end, D.mul(start, -1)) if step > 0 else D.add(start, D.mul(end, -1))
    length = D.ceildiv(span, abs(step))
    if isinstance(length, int):
        return start, max(length, 0)
    ctx.assume(length, f"the slice [{D.to_text(start)}, {D.to_text(end)}) must not run backwards")
    return start, length


def _clamp(ctx, v: Dim, dim: Dim, lo: Dim, hi: Dim, end: bool) -> Dim:
    """Normalize a negative index and clamp it to [lo, hi]. With a symbolic dim, an end like 10 becomes
    ``min(10, seq)``; other symbolic values are taken as in range (keeps shapes like ``seq - 1`` exact), which
    the runtime checks (``ctx.assume``): shapes that break it are refused, never read out of bounds."""
    if isinstance(v, int):
        if v >= BIG:
            return hi
        if v <= -BIG:
            return lo
        if v < 0:
            v = D.add(dim, v)
        if D.is_static([v, lo, hi]):
            return min(max(v, lo), hi)
        if isinstance(v, int) and end and v > 0:
            return D.dmin(v, hi)
    why = f"slice index {D.to_text(v)} must lie in [{D.to_text(lo)}, {D.to_text(hi)}]"
    ctx.assume(D.add(v, D.mul(lo, -1)), why)
    ctx.assume(D.add(hi, D.mul(v, -1)), why)
    return v


@lowering("Slice")
def lower_slice(ctx) -> None:
    x = ctx.inputs[0]
    if ctx.has_input(1):
        starts, ends = ctx.host_ints(1), ctx.host_ints(2)
        axes = ctx.host_ints(3) if ctx.has_input(3) else None
        steps = ctx.host_ints(4) if ctx.has_input(4) else None
    else:
        starts, ends, axes, steps = ctx.attr("starts"), ctx.attr("ends"), ctx.attr("axes"), None
    if starts is None or ends is None or (ctx.has_input(3) and axes is None):
        raise ctx.unsupported("starts/ends/axes must be known at build time")
    axes = axes if axes is not None else list(range(len(starts)))
    steps = steps if steps is not None else [1] * len(starts)
    if not D.is_static(steps) or not D.is_static(axes) or 0 in steps:
        raise ctx.unsupported("steps and axes must be non-zero constants")
    first, lengths, step_of = [0] * x.rank, list(x.shape), [1] * x.rank
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = normalize_axis(a, x.rank)
        first[a], lengths[a] = slice_bounds(ctx, s, e, st, x.shape[a])
        step_of[a] = st
    slice_to(ctx, 0, x, first, lengths, step_of)


def slice_to(ctx, i: int, x, first, lengths, steps) -> None:
    """Output ``i`` = x[first : first + length*step : step] on every axis (a view when nothing moves)."""
    if all(f == 0 and length == d and s == 1 for f, length, d, s in zip(first, lengths, x.shape, steps)):
        return ctx.set_alias(i, x, x.shape)
    arrs = host_inputs(ctx, [0], lengths)
    if arrs is not None:
        arr = arrs[0]
        for a in range(x.rank):
            arr = np.take(arr, [first[a] + k * steps[a] for k in range(lengths[a])], axis=a)
        return set_host_array(ctx, i, x.dtype, arr)
    if x.value is None and x.sym is None and _contiguous_prefix(x.shape, first, lengths, steps):
        return ctx.set_alias(i, x, lengths)
    out = ctx.output(i, x.dtype, lengths)
    remap(ctx, x, out, [Axis(n, s, f, st) for n, s, f, st in zip(lengths, contiguous_strides(x.shape), first, steps)])


def _contiguous_prefix(shape, first, lengths, steps) -> bool:
    """Whether the slice is the first elements of ``x`` in memory (a view at offset 0, no copy): every start
    is 0 and step 1; left of the first cut axis only length-1 axes, right of it whole axes."""
    if any(f != 0 for f in first) or any(st != 1 for st in steps):
        return False
    cut = next((a for a, (n, d) in enumerate(zip(lengths, shape)) if n != d), None)
    if cut is None:
        return True
    return all(n == 1 for n in lengths[:cut]) and all(n == d for n, d in zip(lengths[cut + 1:], shape[cut + 1:]))


@lowering("Expand")
def lower_expand(ctx) -> None:
    x = ctx.inputs[0]
    target = ctx.host_ints(1)
    if target is None:
        raise ctx.unsupported("the target shape must be known at build time")
    shape = broadcast_shapes([x.shape, tuple(target)])
    arrs = host_inputs(ctx, [0], shape)
    if arrs is not None:
        return set_host_array(ctx, 0, x.dtype, np.broadcast_to(arrs[0], [int(d) for d in shape]))
    if tuple(shape) == tuple(x.shape) or (D.is_static(x.shape) and D.product(x.shape) == D.product(shape) == 1):
        return ctx.set_alias(0, x, shape)
    remap(ctx, x, ctx.output(0, x.dtype, shape), contiguous_axes(shape, broadcast_strides(x.shape, shape)))


@lowering("Tile")
def lower_tile(ctx) -> None:
    x = ctx.inputs[0]
    reps = ctx.host_ints(1)
    if reps is None:
        raise ctx.unsupported("repeats must be known at build time")
    shape = [D.mul(d, r) for d, r in zip(x.shape, reps)]
    arrs = host_inputs(ctx, [0], shape)
    if arrs is not None and D.is_static(reps):
        return set_host_array(ctx, 0, x.dtype, np.tile(arrs[0], reps))
    axes = [Axis(n, s) if r == 1 else Axis(n, 0) if d == 1 else Axis(n, s, mode="wrap", extent=d)
            for n, s, d, r in zip(shape, contiguous_strides(x.shape), x.shape, reps)]
    remap(ctx, x, ctx.output(0, x.dtype, shape), axes)


@lowering("Concat")
def lower_concat(ctx) -> None:
    present = [t for t in ctx.inputs if t is not None]
    rank = present[0].rank
    axis = normalize_axis(ctx.attr("axis"), rank)
    shape = list(present[0].shape)
    shape[axis] = 0
    for t in present:
        shape[axis] = D.add(shape[axis], t.shape[axis])
    arrs = host_inputs(ctx, [i for i, t in enumerate(ctx.inputs) if t is not None], shape)
    if arrs is not None:
        return set_host_array(ctx, 0, present[0].dtype, np.concatenate(arrs, axis=axis))
    out = ctx.output(0, present[0].dtype, shape)
    outer = D.product(shape[:axis])
    inner = D.product(shape[axis + 1:])
    offset: Dim = 0
    for t in present:
        chunk = D.mul(t.shape[axis], inner)
        total = D.mul(shape[axis], inner)
        remap(ctx, t, out, [Axis(outer, chunk, dst=total), Axis(chunk, 1, dst=1)], dst_base=D.mul(offset, inner))
        offset = D.add(offset, t.shape[axis])


@lowering("Split")
def lower_split(ctx) -> None:
    x = ctx.inputs[0]
    axis = normalize_axis(ctx.attr("axis", 0), x.rank)
    dim = x.shape[axis]
    n_out = len(ctx.node.outputs)
    sizes = ctx.host_ints(1) if ctx.has_input(1) else ctx.attr("split")
    if sizes is None and ctx.has_input(1):
        raise ctx.unsupported("split sizes must be known at build time")
    if sizes is None:
        n = ctx.attr("num_outputs", n_out)
        if ctx.attr("num_outputs") is not None and isinstance(dim, int):
            chunk = -(-dim // n)
            sizes = [min(chunk, max(dim - k * chunk, 0)) for k in range(n)]
        else:
            sizes = [exact_div(dim, n)] * n
    first: Dim = 0
    for i, size in enumerate(sizes):
        starts = [0] * x.rank
        lengths = list(x.shape)
        starts[axis], lengths[axis] = first, size
        slice_to(ctx, i, x, starts, lengths, [1] * x.rank)
        first = D.add(first, size)
