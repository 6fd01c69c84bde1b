"""Resize and Upsample: one separable kernel that computes its coordinates on the GPU.

Interpolation is separable per axis. For every resized axis the kernel maps the output coordinate to a
source coordinate (each coordinate_transformation_mode), picks the window of taps and their weights
(nearest / linear / cubic, antialias, exclude_outside) as ONNX's reference implementation does, and sums
``x[taps] * prod(weights)`` over the product of the axes' windows. Sizes and scales are uniforms when they
are symbolic, so one artifact resizes images of any size: only shapes, scales and attributes decide the
coordinates (never data). Output sizes follow the reference: ``floor(in * scale)`` with the float32 scale
taken exactly (a fraction), ``sizes`` as given, or the keep_aspect_ratio_policy's rounded sizes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ... import dims as D
from ...dims import Dim
from ..bands import banded_read
from ..emit import wgsl_literal
from ..registry import lowering
from .helpers import compute_type, contiguous_strides, normalize_axis

MAX_BANDS = 4  # bindings for an image past one binding: 4 x 128 MiB = 134 megapixels under WebGPU's limits

_CTMS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize",
         "half_pixel_symmetric")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


@dataclass
class ResizedAxis:
    """One axis the kernel resizes. ``kind``: ``scale`` (a constant scale), ``sizes`` (scale = out / in) or
    ``policy`` (the min/max of the requested sizes' ratios, keep_aspect_ratio_policy)."""

    axis: int
    kind: str
    out: Dim
    scale: float | None = None  # the scale when known at build time
    roi: tuple = (0.0, 1.0)  # (tf_crop_and_resize)
    ratios: list = field(default_factory=list)  # [(requested param, input param)], for kind "policy"


def _float_list(ctx, i: int) -> list[float] | None:
    if not ctx.has_input(i):
        return None
    v = ctx.const(i).reshape(-1)
    return None if v.size == 0 else [float(s) for s in v.astype(np.float32)]


def _sizes(ctx, i: int) -> list[Dim] | None:
    if not ctx.has_input(i):
        return None
    sizes = ctx.host_ints(i)
    if sizes is None:
        raise ctx.unsupported("sizes must be known at build time (constants or shape arithmetic)")
    return sizes or None


def plan_axes(ctx, shape, scales, sizes, axes, roi, policy: str) -> tuple[list[ResizedAxis], dict]:
    """The resized axes and the policy's params, like the reference's ``_interpolate_nd``: axes whose scale
    is 1 with an unchanged size and a trivial roi are left alone."""
    r = len(shape)
    axes = list(range(r)) if axes is None else [normalize_axis(a, r) for a in axes]
    rois = {}
    if roi is not None:
        for i, a in enumerate(axes):
            rois[a] = (float(roi[i]), float(roi[len(axes) + i]))
    plan, params = [], {}
    if sizes is not None:
        want = dict(zip(axes, sizes))
        if policy == "stretch":
            for a in axes:
                plan.append(ResizedAxis(a, "sizes", want[a]))
        else:
            plan, params = _policy_axes(shape, axes, want, policy)
    else:
        if scales is None:
            raise ctx.unsupported("neither scales nor sizes are given")
        for a, s in zip(axes, scales):
            f = Fraction(s)
            out = D.floordiv(D.mul(shape[a], f.numerator), f.denominator)
            plan.append(ResizedAxis(a, "scale", out, scale=s))
    kept = []
    for ax in plan:
        lo, hi = rois.get(ax.axis, (0.0, 1.0))
        unit = ax.kind == "sizes" or (ax.scale is not None and math.isclose(ax.scale, 1.0))
        if unit and ax.out == shape[ax.axis] and math.isclose(lo, 0.0) and math.isclose(hi, 1.0):
            continue
        ax.roi = (lo, hi)
        kept.append(ax)
    return kept, params


def _policy_axes(shape, axes, want: dict, policy: str) -> tuple[list[ResizedAxis], dict]:
    """keep_aspect_ratio_policy: one scale for all axes, the min (not_larger) or max (not_smaller) of
    requested / input size; each output size is ``round(in * scale)``, i.e. the min/max over the axes of
    ``round(in * requested_b / in_b)`` (rounding is monotonic)."""
    pick, dpick = (min, D.dmin) if policy == "not_larger" else (max, D.dmax)
    params = {}
    for j, b in enumerate(axes):
        params[f"rq{j}"], params[f"ri{j}"] = want[b], shape[b]
    ratios = [(f"rq{j}", f"ri{j}") for j in range(len(axes))]
    static = D.is_static([want[b] for b in axes] + [shape[b] for b in axes])
    plan = []
    for a in axes:
        if static:
            scale = pick(want[b] / shape[b] for b in axes)
            plan.append(ResizedAxis(a, "policy", int(scale * shape[a] + 0.5), scale=scale, ratios=ratios))
        else:
            outs = [D.floordiv(D.add(D.mul(D.mul(shape[a], want[b]), 2), shape[b]), D.mul(shape[b], 2)) for b in axes]
            out = outs[0]
            for o in outs[1:]:
                out = dpick(out, o)
            plan.append(ResizedAxis(a, "policy", out, ratios=ratios))
    return plan, params


@dataclass
class Interpolation:
    """How values are interpolated (Resize's attributes, or a pre-processing spec's)."""

    mode: str = "linear"  # nearest | linear | cubic
    ctm: str = "half_pixel"  # coordinate_transformation_mode
    nearest: str = "round_prefer_floor"
    antialias: bool = False
    exclude_outside: bool = False
    cubic_a: float = -0.75
    extrapolation: float = 0.0
    policy: str = "stretch"  # keep_aspect_ratio_policy

    def check(self, ctx) -> None:
        if self.mode not in ("nearest", "linear", "cubic"):
            raise ctx.unsupported(f"mode {self.mode!r}")
        if self.ctm not in _CTMS:
            raise ctx.unsupported(f"coordinate_transformation_mode {self.ctm!r}")
        if self.nearest not in _NEAREST:
            raise ctx.unsupported(f"nearest_mode {self.nearest!r}")
        if self.antialias and self.mode == "nearest":
            raise ctx.unsupported("antialias with mode 'nearest'")


def resize_plan(ctx) -> tuple[list[ResizedAxis], Interpolation, dict, list]:
    """Resize / Upsample's resized axes, interpolation, policy params and output shape."""
    x = ctx.inputs[0]
    if ctx.op == "Upsample" or (ctx.opset < 11 and not ctx.has_input(2) and not ctx.has_input(3)):
        roi, sizes = None, None
        scales = _float_list(ctx, 1) if ctx.has_input(1) else [float(s) for s in ctx.attr("scales", [])] or None
        how = Interpolation(ctm="asymmetric", nearest="floor")
    else:
        roi, scales, sizes = _float_list(ctx, 1), _float_list(ctx, 2), _sizes(ctx, 3)
        how = Interpolation(ctm=ctx.attr("coordinate_transformation_mode", "half_pixel"),
                            nearest=ctx.attr("nearest_mode", "round_prefer_floor"))
    mode = ctx.attr("mode", "nearest")
    how.mode = "linear" if mode in ("bilinear", "trilinear") else mode
    how.antialias, how.exclude_outside = bool(ctx.attr("antialias", 0)), bool(ctx.attr("exclude_outside", 0))
    how.cubic_a, how.extrapolation = float(ctx.attr("cubic_coeff_a", -0.75)), float(ctx.attr("extrapolation_value", 0.0))
    how.policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
    how.check(ctx)
    axes, policy_params = plan_axes(ctx, list(x.shape), scales, sizes, ctx.attr("axes"), roi, how.policy)
    out_shape = list(x.shape)
    for ax in axes:
        out_shape[ax.axis] = ax.out
    return axes, how, policy_params, out_shape


@lowering("Resize", "Upsample")
def lower_resize(ctx, **epilogue) -> None:
    """``epilogue``: a fused elementwise program applied where the kernel stores (kernels/fused.py)."""
    x = ctx.inputs[0]
    axes, how, policy_params, out_shape = resize_plan(ctx)
    if not axes and not epilogue:
        return ctx.set_alias(0, x, x.shape)
    emit_resize(ctx, x, ctx.output(0, x.dtype, out_shape), axes, how, policy_params, **epilogue)


def emit_resize(ctx, x, out, axes: list[ResizedAxis], how: Interpolation, params: dict | None = None, *,
                shape=None, strides=None, channels: list[int] | None = None, offsets: list | None = None,
                epilogue_fn: str = "", extra_reads: dict | None = None, letterbox: bool = False,
                banded: bool = False) -> None:
    """The resize kernel from ``x`` (seen as ``shape`` with ``strides``, default its own) into ``out``.
    ``channels``: ``x`` holds RGBA8 pixels packed in u32 words, axis 1 picks the byte of each (0 = R) and
    the values are 0..255; ``offsets``: per resized axis, output coordinate ``c`` is resized coordinate
    ``c + offset`` (a crop; with ``letterbox``, ``c - offset``, outside the resized image ``how.extrapolation``).
    ``epilogue_fn``/``extra_reads``: ``epi(value, row, col, idx)`` applied to each
    stored value (``row``: the axis-1 coordinate, ``col``: the last axis') and the tensors it reads.
    ``banded``: ``x`` may exceed one binding (a photo): read in bands (codegen/bands.py)."""
    shape = list(x.shape) if shape is None else shape
    strides = contiguous_strides(shape) if strides is None else strides
    params = {"n": out.numel, **(params or {})}
    for d, (dim, stride) in enumerate(zip(out.shape, strides)):
        params[f"od{d}"], params[f"is{d}"] = dim, stride
    for k, ax in enumerate(axes):
        params[f"i{k}"], params[f"o{k}"] = shape[ax.axis], ax.out
        params[f"off{k}"] = offsets[k] if offsets else 0
    extra = {k: ctx.gpu(t) for k, t in (extra_reads or {}).items()}
    reads, bands = {"x": ctx.gpu(x)}, {}
    if banded:
        spare = ctx.limits["max_storage_buffers"] - 1 - len(extra)
        reads, bands = banded_read(ctx, "x", x, min(MAX_BANDS, spare))
    reads.update(extra)
    ctx.dispatch("resize.wgsl.j2", reads, {"out": out}, work=out.numel, params=params, rank=out.rank,
                 axes=axes, resized=[ax.axis for ax in axes], mode=how.mode, nearest_mode=how.nearest, ctm=how.ctm,
                 antialias=how.antialias, exclude=how.exclude_outside, cubic_a=wgsl_literal(how.cubic_a, "f32"),
                 extrap=wgsl_literal(how.extrapolation, "f32"), to_out=_to_out(out.dtype),
                 policy="min" if how.policy == "not_larger" else "max", channels=channels,
                 epilogue_fn=epilogue_fn, letterbox=letterbox, bands=bands)


def _to_out(dtype: str) -> str:
    """WGSL expression converting the f32 sum ``acc`` to the output's compute type."""
    ct = compute_type(dtype)
    if ct == "f32":
        return "acc"
    lo, hi = {"uint8": (0, 255), "int8": (-128, 127)}.get(dtype, (-2147483648.0, 2147483520.0))
    return f"{ct}(clamp(round(acc), {float(lo)}, {float(hi)}))"
