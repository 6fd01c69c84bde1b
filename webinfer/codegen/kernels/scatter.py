"""ScatterElements and ScatterND (reduction none/add/mul/max/min).

Without a reduction: copy the data, then one invocation per update writes it (two dispatches, O(updates)).
With a reduction: one invocation per output element folds, in order, every update aimed at it, so duplicate
targets combine deterministically without float atomics (O(outputs x updates along the axis / tuples)).
"""

from __future__ import annotations

from ... import dims as D
from ..registry import lowering
from .helpers import contiguous_strides, normalize_axis
from .movement import contiguous_axes, remap
from .reduce import LOOP_BUDGET

PASS_UPDATES = 32768
COMBINE = {"add": "acc + v", "mul": "acc * v", "max": "max(acc, v)", "min": "min(acc, v)", "none": "v"}


def _scatter(ctx, kind: str, out, params: dict, direct: bool, **tctx) -> None:
    x, idx, upd = (ctx.gpu(t) for t in ctx.inputs[:3])
    reduction = ctx.attr("reduction", "none")
    if reduction not in COMBINE:
        raise ctx.unsupported(f"reduction {reduction!r} is not supported")
    if direct:
        remap(ctx, x, out, contiguous_axes(x.shape))
        work = upd.numel
    else:
        work = out.numel
    if work == 0:
        return
    # each output element walks every update that could target it: past lavapipe's loop limit (it stops
    # silently), the updates are folded in passes of PASS_UPDATES, each pass reading the last one's result
    count = None if direct else params.get("m", params.get(f"u{tctx.get('axis')}"))
    spans = [None]
    if isinstance(count, int) and count >= LOOP_BUDGET:
        spans = [(j, min(j + PASS_UPDATES, count)) for j in range(0, count, PASS_UPDATES)]
    src = x
    for i, span in enumerate(spans):
        dst = out if i == len(spans) - 1 else ctx.temp(out.dtype, out.shape)
        reads = {"idx": idx, "upd": upd} if direct else {"x": src, "idx": idx, "upd": upd}
        ctx.dispatch("scatter.wgsl.j2", reads, {"out": dst}, work=work, params={"n": work, **params},
                     kind=kind, direct=direct, combine=COMBINE[reduction], span=span, **tctx)
        src = dst


@lowering("ScatterElements", "Scatter")
def lower_scatter_elements(ctx) -> None:
    x, idx = ctx.inputs[0], ctx.inputs[1]
    axis = normalize_axis(ctx.attr("axis", 0), x.rank)
    out = ctx.output(0, x.dtype, x.shape)
    direct = ctx.attr("reduction", "none") == "none"
    xs, us = contiguous_strides(x.shape), contiguous_strides(idx.shape)
    params: dict = {"adim": ("i32", x.shape[axis])}
    walk = idx.shape if direct else x.shape
    for d in range(x.rank):
        params.update({f"d{d}": walk[d], f"o{d}": xs[d], f"u{d}": idx.shape[d], f"s{d}": us[d]})
    _scatter(ctx, "elements", out, params, direct, rank=x.rank, axis=axis)


@lowering("ScatterND")
def lower_scatter_nd(ctx) -> None:
    x, idx = ctx.inputs[0], ctx.inputs[1]
    k = idx.shape[-1]
    if not isinstance(k, int):
        raise ctx.unsupported("the last dim of the indices must be static")
    out = ctx.output(0, x.dtype, x.shape)
    strides = contiguous_strides(x.shape)
    params: dict = {"inner": D.product(x.shape[k:]), "m": D.product(idx.shape[:-1])}
    for t in range(k):
        params.update({f"e{t}": ("i32", x.shape[t]), f"s{t}": strides[t]})
    _scatter(ctx, "nd", out, params, ctx.attr("reduction", "none") == "none", k=k)


@lowering("TensorScatter")
def lower_tensor_scatter(ctx) -> None:
    """present[b, ..., s, ...] = update[b, ..., s - w[b], ...] where 0 <= s - w[b] < S (mod the cache length in
    circular mode), else past: one invocation per cache element, so it is a gather and deterministic."""
    past, upd = ctx.inputs[0], ctx.inputs[1]
    axis = normalize_axis(ctx.attr("axis", -2), past.rank)
    mode = ctx.attr("mode", "linear")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if axis == 0 or mode not in ("linear", "circular"):
        raise ctx.unsupported(f"axis {axis} / mode {mode!r} (the sequence axis comes after the batch axis)")
    out = ctx.output(0, past.dtype, past.shape)
    if out.numel == 0:
        return
    reads = {"x": ctx.gpu(past), "upd": ctx.gpu(upd)}
    if ctx.has_input(2):
        reads["w"] = ctx.gpu(ctx.inputs[2])
    params = {"n": out.numel, "inner": D.product(past.shape[axis + 1:]), "M": past.shape[axis], "S": upd.shape[axis],
              "per_batch": D.product(past.shape[1:axis])}
    ctx.dispatch("tensor_scatter.wgsl.j2", reads, {"out": out}, work=out.numel, params=params,
                 circular=mode == "circular", indexed=ctx.has_input(2))
