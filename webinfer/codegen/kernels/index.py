"""Indexed reads: Gather, GatherElements, GatherND, OneHot, ReverseSequence, Compress (constant condition),
Trilu. Each is one dispatch of ``index.wgsl.j2`` (or ``generate.wgsl.j2`` for Trilu); Gather on small
integer tensors from shape arithmetic runs on the host.
"""

from __future__ import annotations

import numpy as np

from ... import dims as D
from ..registry import lowering
from ..split import row_parts
from .helpers import compute_type, contiguous_strides, generate, normalize_axis
from .movement import Axis, host_inputs, remap, set_host_array


def _gather_kernel(ctx, kind: str, reads: dict, out, params: dict, **tctx) -> None:
    if out.numel == 0:
        return
    reads = {k: ctx.gpu(v) for k, v in reads.items()}
    ctx.dispatch("index.wgsl.j2", reads, {"out": out}, work=out.numel, params={"n": out.numel, **params},
                 kind=kind, **tctx)


@lowering("Gather")
def lower_gather(ctx) -> None:
    x, idx = ctx.inputs[0], ctx.inputs[1]
    axis = normalize_axis(ctx.attr("axis", 0), x.rank)
    shape = list(x.shape[:axis]) + list(idx.shape) + list(x.shape[axis + 1:])
    arrs = host_inputs(ctx, [0, 1], shape)
    if arrs is not None and D.is_static(arrs[1].reshape(-1)):
        dim = x.shape[axis]
        index = np.vectorize(lambda v: v + dim if v < 0 else v, otypes=[object])(arrs[1]).astype(np.int64)
        return set_host_array(ctx, 0, x.dtype, np.take(arrs[0], index, axis=axis))
    out = ctx.output(0, x.dtype, shape)
    if idx.value is not None and idx.value.size == 1 and isinstance(x.shape[axis], int):
        v = int(idx.value.reshape(-1)[0])
        v = v + x.shape[axis] if v < 0 else v
        axes = [Axis(d, s) for d, s in zip(x.shape, contiguous_strides(x.shape))]
        axes[axis] = Axis(1, axes[axis].stride, v)
        return remap(ctx, x, out, axes)
    params = {"inner": D.product(x.shape[axis + 1:]), "nidx": idx.numel, "adim": ("i32", x.shape[axis])}
    parts = row_parts(ctx, [x]) if axis == 0 else None
    if parts is None:
        return _gather_kernel(ctx, "gather", {"x": x, "idx": idx}, out, params)
    for lo, hi, (xp,) in parts:  # a table over one binding: each part's dispatch writes the rows it holds
        _gather_kernel(ctx, "gather", {"x": xp, "idx": idx}, out, {**params, "lo": lo, "rows": hi - lo}, part=True)


@lowering("GatherElements")
def lower_gather_elements(ctx) -> None:
    x, idx = ctx.inputs[0], ctx.inputs[1]
    axis = normalize_axis(ctx.attr("axis", 0), x.rank)
    out = ctx.output(0, x.dtype, idx.shape)
    params: dict = {"adim": ("i32", x.shape[axis])}
    for d, (n, s) in enumerate(zip(idx.shape, contiguous_strides(x.shape))):
        params.update({f"d{d}": n, f"s{d}": s})
    _gather_kernel(ctx, "elements", {"x": x, "idx": idx}, out, params, rank=idx.rank, axis=axis)


@lowering("GatherND")
def lower_gather_nd(ctx) -> None:
    x, idx = ctx.inputs[0], ctx.inputs[1]
    b = ctx.attr("batch_dims", 0)
    k = idx.shape[-1]
    if not isinstance(k, int):
        raise ctx.unsupported("the last dim of the indices must be static")
    out = ctx.output(0, x.dtype, list(idx.shape[:-1]) + list(x.shape[b + k:]))
    strides = contiguous_strides(x.shape)
    params: dict = {"inner": D.product(x.shape[b + k:]), "m": D.product(idx.shape[b:-1]),
                    "bstride": D.product(x.shape[b:])}
    for t in range(k):
        params.update({f"e{t}": ("i32", x.shape[b + t]), f"s{t}": strides[b + t]})
    _gather_kernel(ctx, "nd", {"x": x, "idx": idx}, out, params, k=k)


@lowering("OneHot")
def lower_one_hot(ctx) -> None:
    idx, values = ctx.inputs[0], ctx.inputs[2]
    depth = ctx.host_ints(1)
    if depth is None:
        depth = [int(np.asarray(ctx.const(1)).reshape(-1)[0])]
    axis = normalize_axis(ctx.attr("axis", -1), idx.rank + 1)
    shape = list(idx.shape[:axis]) + [depth[0]] + list(idx.shape[axis:])
    out = ctx.output(0, values.dtype, shape)
    params = {"inner": D.product(idx.shape[axis:]), "depth": ("i32", depth[0])}
    _gather_kernel(ctx, "onehot", {"idx": idx, "vals": values}, out, params)


@lowering("ReverseSequence")
def lower_reverse_sequence(ctx) -> None:
    x, lens = ctx.inputs[0], ctx.inputs[1]
    t_axis, b_axis = ctx.attr("time_axis", 0), ctx.attr("batch_axis", 1)
    strides = contiguous_strides(x.shape)
    out = ctx.output(0, x.dtype, x.shape)
    params = {"tstride": strides[t_axis], "tdim": x.shape[t_axis], "bstride": strides[b_axis],
              "bdim": x.shape[b_axis]}
    _gather_kernel(ctx, "revseq", {"x": x, "lens": lens}, out, params)


@lowering("Compress")
def lower_compress(ctx) -> None:
    x, cond = ctx.inputs[0], ctx.inputs[1]
    if cond.value is None:
        raise ctx.unsupported("the condition must be a constant (the output shape depends on it)")
    axis = ctx.attr("axis")
    shape = list(x.shape) if axis is not None else [x.numel]  # no axis: the flattened input
    axis = normalize_axis(axis, len(shape)) if axis is not None else 0
    keep = np.nonzero(np.asarray(cond.value).reshape(-1)[: int(shape[axis])])[0].astype(np.int64)
    inner = D.product(shape[axis + 1:])
    shape[axis] = len(keep)
    out = ctx.output(0, x.dtype, shape)
    index = ctx._l.constant(keep)  # a weight: the kept positions
    params = {"inner": inner, "nidx": len(keep), "adim": ("i32", x.shape[axis] if len(shape) == x.rank else x.numel)}
    _gather_kernel(ctx, "gather", {"x": x, "idx": index}, out, params)


@lowering("Trilu")
def lower_trilu(ctx) -> None:
    x = ctx.inputs[0]
    k = ctx.host_ints(1) if ctx.has_input(1) else [0]
    if k is None:
        raise ctx.unsupported("k must be known at build time")
    out = ctx.output(0, x.dtype, x.shape)
    if out.numel == 0:
        return
    ct = compute_type(x.dtype)
    zero = "false" if ct == "bool" else f"{ct}(0)"
    cmp = ">=" if ctx.attr("upper", 1) else "<="
    generate(ctx, out, f"select({zero}, ld_x(gi), col - row {cmp} k)", {"k": ("i32", k[0])}, matrix=True,
             reads={"x": ctx.gpu(x)})
