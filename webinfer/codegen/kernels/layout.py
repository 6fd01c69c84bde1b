"""Layout ops on the index-remap kernel: Pad (constant/reflect/edge/wrap), CenterCropPad, DepthToSpace,
SpaceToDepth. Each only describes per-axis source walks (see ``movement.Axis``)."""

from __future__ import annotations

import numpy as np

from ... import dims as D
from ..registry import lowering
from .helpers import contiguous_strides, normalize_axis
from .movement import Axis, pad_literal, remap, transpose_axes

_PAD_MODES = {"constant": "check", "reflect": "reflect", "edge": "clamp", "wrap": "wrap"}


@lowering("Pad")
def lower_pad(ctx) -> None:
    x = ctx.inputs[0]
    mode = ctx.attr("mode", "constant")
    if mode not in _PAD_MODES:
        raise ctx.unsupported(f"mode {mode!r} is not supported")
    pads = ctx.host_ints(1) if ctx.has_input(1) else ctx.attr("pads")
    if pads is None:
        raise ctx.unsupported("pads must be known at build time")
    axes = ctx.host_ints(3) if ctx.has_input(3) else list(range(x.rank))
    if axes is None or not D.is_static(axes):
        raise ctx.unsupported("axes must be constants")
    axes = [normalize_axis(a, x.rank) for a in axes]
    before, after = [0] * x.rank, [0] * x.rank
    for i, a in enumerate(axes):
        before[a], after[a] = pads[i], pads[len(axes) + i]
    pad, extra = _pad_value(ctx, x)
    out = ctx.output(0, x.dtype, [D.add(D.add(d, b), e) for d, b, e in zip(x.shape, before, after)])
    walk = []
    for n, d, s, b, e in zip(out.shape, x.shape, contiguous_strides(x.shape), before, after):
        if b == 0 and isinstance(e, int) and e <= 0:
            walk.append(Axis(n, s))
        else:
            walk.append(Axis(n, s, D.mul(b, -1), mode=_PAD_MODES[mode], extent=d))
    remap(ctx, x, out, walk, pad=pad, reads_extra=extra)


def _pad_value(ctx, x) -> tuple[str, dict]:
    """The constant pad value as a literal, or bound as a one-element buffer when it is data."""
    if ctx.has_input(2):
        t = ctx.inputs[2]
        if t.value is None:
            return "ld_v(0u)", {"v": ctx.gpu(t)}
        return pad_literal(ctx, np.asarray(t.value).reshape(-1)[0], x.dtype), {}
    return pad_literal(ctx, ctx.attr("value", 0.0), x.dtype), {}


@lowering("CenterCropPad")
def lower_center_crop_pad(ctx) -> None:
    x = ctx.inputs[0]
    target = ctx.host_ints(1)
    if target is None:
        raise ctx.unsupported("the target shape must be known at build time")
    axes = ctx.attr("axes") or list(range(x.rank))
    shape = list(x.shape)
    walk = [Axis(d, s) for d, s in zip(x.shape, contiguous_strides(x.shape))]
    for a, t in zip(axes, target):
        a = normalize_axis(a, x.rank)
        dim = x.shape[a]
        shape[a] = t
        if D.is_static([t, dim]):
            if t < dim:
                walk[a] = Axis(t, walk[a].stride, (dim - t) // 2)
            elif t > dim:
                walk[a] = Axis(t, walk[a].stride, -((t - dim) // 2), mode="check", extent=dim)
        elif t != dim:  # crop (start (dim - t) // 2) or pad (begin (t - dim) // 2), decided by the run's sizes
            start = D.add(D.floordiv(D.dmax(D.add(dim, D.mul(t, -1)), 0), 2),
                          D.mul(D.floordiv(D.dmax(D.add(t, D.mul(dim, -1)), 0), 2), -1))
            walk[a] = Axis(t, walk[a].stride, start, mode="check", extent=dim)
    remap(ctx, x, ctx.output(0, x.dtype, shape), walk, pad=pad_literal(ctx, 0, x.dtype))


@lowering("DepthToSpace")
def lower_depth_to_space(ctx) -> None:
    x = ctx.inputs[0]
    b = ctx.attr("blocksize")
    n, c, h, w = x.shape
    c2 = D.floordiv(c, b * b)
    if ctx.attr("mode", "DCR") == "DCR":
        view, perm = [n, b, b, c2, h, w], [0, 3, 4, 1, 5, 2]
    else:
        view, perm = [n, c2, b, b, h, w], [0, 1, 4, 2, 5, 3]
    out = ctx.output(0, x.dtype, [n, c2, D.mul(h, b), D.mul(w, b)])
    remap(ctx, x, out, transpose_axes(view, perm))


@lowering("SpaceToDepth")
def lower_space_to_depth(ctx) -> None:
    x = ctx.inputs[0]
    b = ctx.attr("blocksize")
    n, c, h, w = x.shape
    h2, w2 = D.floordiv(h, b), D.floordiv(w, b)
    out = ctx.output(0, x.dtype, [n, D.mul(c, b * b), h2, w2])
    remap(ctx, x, out, transpose_axes([n, c, h2, b, w2, b], [0, 3, 5, 1, 2, 4]))
