"""Resize and Upsample: one separable gather-and-weight kernel.

Interpolation is separable per axis, so for every resized axis we build, at build time, a tap table:
for each output coordinate, the input indices it reads and their weights (nearest: one tap; linear: two;
cubic: four; antialias: the filter footprint). The tables are derived only from shapes, scales and
attributes (never from data), with the 1-D routine of ONNX's reference implementation applied to an
identity matrix, so every coordinate-transformation and rounding mode matches it. The kernel then sums
``x[taps] * prod(weights)`` over the product of the axes' taps. An extrapolated output coordinate
(tf_crop_and_resize outside the input) gets index -1 and yields ``extrapolation_value``.
"""

from __future__ import annotations

import math

import numpy as np

from ..emit import wgsl_literal
from ..registry import lowering
from .helpers import compute_type, contiguous_strides

MAX_TAPS_TOTAL = 4096  # product of the taps of all axes, a bound on the per-element loop


def _coeff_fn(mode: str, nearest_mode: str, cubic_a: float, antialias: bool):
    from onnx.reference.ops import op_resize as R

    if mode == "nearest":
        return lambda ratio, scale: R._nearest_coeffs(ratio, mode=nearest_mode)
    if mode == "cubic":
        fn = R._cubic_coeffs_antialias if antialias else R._cubic_coeffs
        return lambda ratio, scale: fn(ratio, scale, A=cubic_a)
    return R._linear_coeffs_antialias if antialias else R._linear_coeffs


def axis_table(in_w: int, out_w: int, scale: float, coeffs, roi, ctm: str, exclude: bool):
    """(indices, weights) of shape (out_w, taps); index -1 marks an extrapolated output coordinate."""
    from onnx.reference.ops import op_resize as R

    m = R._interpolate_1d_along_axis(np.eye(in_w), 0, scale, out_w, coeffs, roi=roi, extrapolation_value=np.nan,
                                     coordinate_transformation_mode=ctm, exclude_outside=exclude)
    m = np.asarray(m, dtype=np.float64).reshape(out_w, in_w)
    extrap = np.isnan(m).any(axis=1)
    m = np.where(np.isnan(m), 0.0, m)
    taps = max(1, int((m != 0).sum(axis=1).max(initial=0)))
    idx = np.zeros((out_w, taps), np.int32)
    w = np.zeros((out_w, taps), np.float32)
    for o in range(out_w):
        nz = np.nonzero(m[o])[0]
        idx[o, : len(nz)] = nz
        w[o, : len(nz)] = m[o, nz]
    idx[extrap] = -1
    return idx, w


def resize_plan(shape, scales, sizes, axes, roi, policy: str):
    """Per-axis (scale, out size, roi pair or None), like the reference's ``_interpolate_nd``."""
    r = len(shape)
    axes = list(range(r)) if axes is None else [a + r if a < 0 else a for a in axes]
    full_scales = full_sizes = None
    if scales is not None and len(scales):
        full_scales = [1.0] * r
        for i, a in enumerate(axes):
            full_scales[a] = float(scales[i])
    if sizes is not None and len(sizes):
        full_sizes = list(shape)
        for i, a in enumerate(axes):
            full_sizes[a] = int(sizes[i])
    full_roi = None
    if roi is not None and len(roi):
        n = len(axes)
        full_roi = [0.0] * r + [1.0] * r
        for i, a in enumerate(axes):
            full_roi[a], full_roi[r + a] = float(roi[i]), float(roi[n + i])
    if full_sizes is not None:
        full_scales = [full_sizes[i] / shape[i] for i in range(r)]
        if policy != "stretch":
            s = (min if policy == "not_larger" else max)(full_scales[a] for a in axes)
            full_scales = [s if i in axes else 1.0 for i in range(r)]
            full_sizes = [int(s * shape[i] + 0.5) if i in axes else shape[i] for i in range(r)]
    else:
        full_sizes = list((np.array(full_scales) * np.array(shape)).astype(int))
    plan = []
    for a in range(r):
        rp = None if full_roi is None else [full_roi[a], full_roi[a + r]]
        same = math.isclose(full_scales[a], 1.0) and full_sizes[a] == shape[a]
        trivial_roi = rp is None or (math.isclose(rp[0], 0.0) and math.isclose(rp[1], 1.0))
        plan.append(None if (same and trivial_roi) else (full_scales[a], int(full_sizes[a]), rp))
    return plan


def _const_input(ctx, i):
    if not ctx.has_input(i):
        return None
    v = ctx.const(i)
    return None if v.size == 0 else v.reshape(-1)


@lowering("Resize", "Upsample")
def lower_resize(ctx) -> None:
    x = ctx.inputs[0]
    if ctx.op == "Upsample" or (ctx.opset < 11 and len(ctx.inputs) == 2):
        roi, scales, sizes = None, _const_input(ctx, 1), None
        ctm, nearest = "asymmetric", "floor"
    else:
        roi, scales, sizes = _const_input(ctx, 1), _const_input(ctx, 2), _const_input(ctx, 3)
        ctm = ctx.attr("coordinate_transformation_mode", "half_pixel")
        nearest = ctx.attr("nearest_mode", "round_prefer_floor")
    mode = ctx.attr("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise ctx.unsupported(f"mode {mode!r}")
    axes = ctx.attr("axes")
    policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
    coeffs = _coeff_fn(mode, nearest, float(ctx.attr("cubic_coeff_a", -0.75)), bool(ctx.attr("antialias", 0)))
    plan = resize_plan([d if isinstance(d, int) else -1 for d in x.shape], scales, sizes, axes, roi, policy)
    tables, out_shape = [], list(x.shape)
    for a, step in enumerate(plan):
        if step is None:
            continue
        if not isinstance(x.shape[a], int):
            raise ctx.unsupported("a resized axis must have a fixed size")
        scale, out_w, rp = step
        idx, w = axis_table(x.shape[a], out_w, scale, coeffs, rp, ctm, bool(ctx.attr("exclude_outside", 0)))
        tables.append((a, idx, w))
        out_shape[a] = out_w
    out = ctx.output(0, x.dtype, out_shape)
    emit_resize(ctx, x, out, tables, float(ctx.attr("extrapolation_value", 0.0)))


def emit_resize(ctx, x, out, tables, extrapolation: float) -> None:
    if not tables:
        tables = [(0, np.arange(int(x.shape[0]), dtype=np.int32)[:, None], np.ones((int(x.shape[0]), 1), np.float32))]
    total = int(np.prod([t[1].shape[1] for t in tables]))
    if total > MAX_TAPS_TOTAL:
        raise ctx.unsupported(f"{total} taps per output element (limit {MAX_TAPS_TOTAL})")
    idx = np.concatenate([t[1].reshape(-1) for t in tables]).astype(np.int32)
    w = np.concatenate([t[2].reshape(-1) for t in tables]).astype(np.float32)
    offsets = np.cumsum([0] + [t[1].size for t in tables])
    in_strides = contiguous_strides(x.shape)
    params: dict = {"n": out.numel}
    for d, dim in enumerate(out.shape):
        params[f"od{d}"] = dim
        params[f"is{d}"] = in_strides[d]
    axes = []
    for k, (a, ti, _) in enumerate(tables):
        axes.append({"axis": a, "taps": ti.shape[1], "off": int(offsets[k])})
    ct = compute_type(x.dtype)
    ctx.dispatch("resize.wgsl.j2", {"x": ctx.gpu(x), "tidx": ctx._l.constant(idx), "tw": ctx._l.constant(w)},
                 {"out": out}, work=out.numel, params=params, rank=out.rank, axes=axes,
                 resized=[a["axis"] for a in axes], ct=ct, extrap=wgsl_literal(extrapolation, "f32"),
                 to_out=_to_out(x.dtype))


def _to_out(dtype: str) -> str:
    """WGSL expression converting the f32 sum ``acc`` to the output's compute type."""
    ct = compute_type(dtype)
    if ct == "f32":
        return "acc"
    lo, hi = {"uint8": (0, 255), "int8": (-128, 127)}.get(dtype, (-2147483648.0, 2147483520.0))
    return f"{ct}(clamp(round(acc), {float(lo)}, {float(hi)}))"


__all__ = ["axis_table", "resize_plan"]
