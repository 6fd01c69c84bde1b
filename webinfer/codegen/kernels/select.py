"""Ops whose output size depends on the data: NonZero, Unique, NonMaxSuppression, and Range over data.

Each computes its results on the GPU into buffers sized for the most it can produce, plus the count it found
in a one-element int32 tensor. ``ctx.counted`` turns that count into a dim (sized at the bound); the runtime
reads it back (4 bytes) before the next step and runs the rest with it, so the outputs are exactly the counted
prefix and later ops see an ordinary symbolic dim. Where results must be packed (NonZero, NMS), a scan gives
each chunk of candidates its first output position (``exclusive_scan``), so positions follow input order.
"""

from __future__ import annotations

from ... import dims as D
from ..registry import lowering
from .helpers import compute_type, contiguous_strides, generate, normalize_axis
from .loop_limit import check_loop

CHUNK = 64  # candidates per invocation in NonZero's counting and writing passes
RANGE_BOUND = 1 << 16  # elements a Range over run-time values may produce (its output is sized for that many)


def _static(ctx, value, what: str) -> int:
    if not isinstance(value, int):
        raise ctx.unsupported(f"{what} must be static")
    return value


def exclusive_scan(ctx, partial, count) -> None:
    """partial[i] <- sum(partial[:i]) in place; count[0] <- the total (one invocation: partial is short)."""
    ctx.dispatch("select.wgsl.j2", {}, {"part": partial, "count": count}, work=1, wg=1,
                 params={"m": partial.numel}, kind="scan")


@lowering("NonZero")
def lower_nonzero(ctx) -> None:
    x = ctx.inputs[0]
    n = _static(ctx, x.numel, "the input size")
    rank = max(x.rank, 1)
    t = compute_type(x.dtype)
    flag = "ld_x(i)" if t == "bool" else f"ld_x(i) != {t}(0)"
    count = ctx.temp("int32", (1,))
    chunks = max(1, -(-n // CHUNK))
    partial = ctx.temp("uint32", (chunks,))
    params = {"n": n, "chunks": chunks}
    shape = x.shape if x.rank else (1,)
    for d, (size, stride) in enumerate(zip(shape, contiguous_strides(shape))):
        params[f"d{d}"], params[f"s{d}"] = size, stride
    gx = ctx.gpu(x)
    ctx.dispatch("select.wgsl.j2", {"x": gx}, {"part": partial}, work=chunks, wg=64, params=params,
                 kind="nonzero_count", flag=flag, chunk=CHUNK)
    exclusive_scan(ctx, partial, count)
    found = ctx.counted(count, n)
    out = ctx.output(0, "int64", (rank, found))
    ctx.dispatch("select.wgsl.j2", {"x": gx, "part": partial, "count": count}, {"out": out}, work=chunks, wg=64,
                 params=params, kind="nonzero_write", flag=flag, chunk=CHUNK, rank=rank)


def range_of_data(ctx) -> None:
    """Range whose start, limit or delta is computed at run time (shape.lower_range handles the others): the
    length max(ceil((limit - start) / delta), 0) is computed on the GPU and counted."""
    dt = ctx.inputs[0].dtype
    t = compute_type(dt)
    if t not in ("f32", "i32"):
        raise ctx.unsupported(f"Range of {dt}")
    reads = {f"v{i}": ctx.gpu(ctx.inputs[i]) for i in range(3)}
    count = ctx.temp("int32", (1,))
    ctx.dispatch("select.wgsl.j2", reads, {"count": count}, work=1, wg=1, params={}, kind="range_count", t=t)
    out = ctx.output(0, dt, (ctx.counted(count, RANGE_BOUND),))
    generate(ctx, out, f"ld_v0(0u) + {t}(gi) * ld_v2(0u)", reads={"v0": reads["v0"], "v2": reads["v2"]})


@lowering("Unique")
def lower_unique(ctx) -> None:
    """Items are the elements (no axis) or the slices along ``axis``, compared lexicographically. Per item: is it
    the first of its value (O(items) each), then its rank among the first ones (sorted: how many first items are
    smaller; else how many come before it), which places its value, index and count; inverse indices take the
    rank of each item's first occurrence."""
    x = ctx.inputs[0]
    axis = ctx.attr("axis")
    if axis is None:
        items, pre, post = _static(ctx, x.numel, "the input size"), 1, 1
    else:
        a = normalize_axis(axis, x.rank)
        items = _static(ctx, x.shape[a], "the unique axis")
        pre, post = D.product(x.shape[:a]), D.product(x.shape[a + 1:])
    check_loop(ctx, D.mul(items, post), "the items to compare")
    first, pos, count = ctx.temp("uint32", (items,)), ctx.temp("uint32", (items,)), ctx.temp("int32", (1,))
    params = {"L": items, "pre": pre, "post": post, "S": D.mul(pre, post)}
    tctx = {"sorted": bool(ctx.attr("sorted", 1)), "t": compute_type(x.dtype)}
    gx = ctx.gpu(x)
    ctx.dispatch("select.wgsl.j2", {"x": gx}, {"first": first, "pos": pos}, work=items, wg=64, params=params,
                 kind="unique_first", **tctx)
    exclusive_scan(ctx, pos, count)
    found = ctx.counted(count, items)
    y_shape = (found,) if axis is None else (*x.shape[:a], found, *x.shape[a + 1:])
    writes = {"y": ctx.output(0, x.dtype, y_shape)}
    for i, name in ((1, "idx"), (3, "cnt")):
        if _wanted(ctx, i):
            writes[name] = ctx.output(i, "int64", (found,))
    reads = {"x": gx, "first": first, "pos": pos, "count": count}
    ctx.dispatch("select.wgsl.j2", reads, writes, work=items, wg=64, params=params, kind="unique_write",
                 outs=sorted(writes), **tctx)
    if _wanted(ctx, 2):
        inv = ctx.output(2, "int64", (items,))
        ctx.dispatch("select.wgsl.j2", {"x": gx, "first": first, "pos": pos}, {"inv": inv}, work=items, wg=64,
                     params=params, kind="unique_inverse", **tctx)


def _wanted(ctx, i: int) -> bool:
    outs = ctx.node.outputs
    return i < len(outs) and outs[i] is not None and bool(outs[i].name)


NMS_WG = 256  # lanes marking the boxes a kept box suppresses (WebGPU's default limit of invocations)
MAX_SYMBOLIC_ROWS = 1 << 20  # NMS rows buffered when the box count is symbolic (the bound is then the limit's)


@lowering("NonMaxSuppression")
def lower_nms(ctx) -> None:
    """Per (batch, class) greedy selection, best score first (ties: lower box index), skipping boxes whose IoU
    with a kept one exceeds the threshold, at most max_output_boxes_per_class (nms.wgsl.j2); a scan over the
    per-class counts places each class's rows, in (batch, class) order."""
    import numpy as np

    boxes, scores = ctx.inputs[0], ctx.inputs[1]
    b, c = (_static(ctx, d, "the batch and class dims") for d in (scores.shape[0], scores.shape[1]))
    n = scores.shape[2]  # symbolic when the model takes any image size (the anchors follow H and W)
    limit = ctx.host_ints(2) if ctx.has_input(2) else [0]
    if limit is None or len(limit) != 1 or not isinstance(limit[0], int):
        raise ctx.unsupported("max_output_boxes_per_class must be known at build time")
    per_class = min(max(limit[0], 0), n) if isinstance(n, int) else max(limit[0], 0)
    if not isinstance(n, int) and b * c * per_class > MAX_SYMBOLIC_ROWS:
        raise ctx.unsupported(f"max_output_boxes_per_class {limit[0]} with a symbolic box count (buffers are "
                              f"sized for {b * c} x that many rows; at most {MAX_SYMBOLIC_ROWS} rows)")
    if per_class == 0 or b * c == 0:
        ctx.set_const(0, np.zeros((0, 3), np.int64))
        return
    reads = {"boxes": ctx.gpu(boxes), "scores": ctx.gpu(scores)}
    for i, name in ((3, "iou"), (4, "thr")):
        if ctx.has_input(i):
            reads[name] = ctx.gpu(ctx.inputs[i])
    taken, chosen = ctx.temp("uint32", (D.mul(b * c, n),)), ctx.temp("int32", (b * c * per_class,))
    counts, count = ctx.temp("uint32", (b * c,)), ctx.temp("int32", (1,))
    # the bitonic sort's power of two (2n bounds it when n is symbolic)
    pad = 1 << max(n - 1, 0).bit_length() if isinstance(n, int) else D.mul(n, 2)
    order = ctx.temp("int32", (D.mul(b * c, pad),))
    params = {"C": c, "N": n, "M": per_class, "BC": b * c, "P": pad}
    tctx = {"centers": bool(ctx.attr("center_point_box", 0)), "has_iou": "iou" in reads, "has_thr": "thr" in reads}
    ctx.dispatch("nms.wgsl.j2", reads, {"order": order, "taken": taken, "chosen": chosen, "part": counts},
                 grid=(min(b * c, 65535), -(-b * c // 65535), 1), wg=NMS_WG, params=params, **tctx)
    exclusive_scan(ctx, counts, count)
    out = ctx.output(0, "int64", (ctx.counted(count, b * c * per_class), 3))
    ctx.dispatch("select.wgsl.j2", {"chosen": chosen, "part": counts, "count": count}, {"out": out}, work=b * c,
                 wg=64, params=params, kind="nms_write", **tctx)
