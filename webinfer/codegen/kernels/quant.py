"""QuantizeLinear, DequantizeLinear (per-tensor, per-axis, blocked) and DynamicQuantizeLinear.

Quantized types include the packed ones (int4/uint4/int2/uint2, float8, float4e2m1): the kernel reads
and writes their codes through the prelude's accessors, so a blocked int4 weight is read packed.

One elementwise kernel: each element finds its scale (and zero point) by its coordinates, where the
quantized axis coordinate is divided by the block size (1 for per-axis) and axes the scale does not
have contribute nothing. Quantizing rounds half to even (WGSL ``round``) and saturates to the output
type's range. DynamicQuantizeLinear first reduces min/max in one workgroup, then quantizes.
"""

from __future__ import annotations

from onnx.helper import tensor_dtype_to_np_dtype

from ... import dims as D
from .. import packed
from ..registry import lowering
from .helpers import compute_type, contiguous_strides, normalize_axis

RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767),
          "int32": (-2147483648, 2147483647), "uint4": (0, 15), "int4": (-8, 7), "uint2": (0, 3), "int2": (-2, 1)}
FLOAT_TARGETS = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float4_e2m1fn")
STATS_WG = 256


def scale_strides(ctx, x, scale) -> tuple[list, int, int]:
    """Per x axis, the scale's stride (0 where the scale does not vary), the axis and the block size."""
    rank = x.rank
    if scale.rank == 0 or (D.is_static(scale.shape) and D.product(scale.shape) == 1 and scale.rank <= 1):
        return [0] * rank, 0, 1
    axis = normalize_axis(ctx.attr("axis", 1), rank)
    block = int(ctx.attr("block_size", 0) or 0)
    if block > 0:
        if scale.rank != rank:
            raise ctx.unsupported("a blocked scale must have the input's rank")
        return [s if scale.shape[d] != 1 else 0 for d, s in enumerate(contiguous_strides(scale.shape))], axis, block
    if scale.rank != 1:
        raise ctx.unsupported("a per-axis scale must be 1-D")
    return [1 if d == axis else 0 for d in range(rank)], axis, 1


def _dispatch(ctx, kind, x, scale, zp, out, ranges=(0, 0), value: str = "") -> None:
    strides, axis, block = scale_strides(ctx, x, scale)
    params: dict = {"n": out.numel, "block": block}
    for d, dim in enumerate(x.shape):
        params[f"d{d}"] = dim
        params[f"ss{d}"] = strides[d]
    reads = {"x": ctx.gpu(x), "scale": ctx.gpu(scale)}
    if zp is not None:
        reads["zp"] = ctx.gpu(zp)
    lo, hi = ranges
    ctx.dispatch("quant.wgsl.j2", reads, {"out": out}, work=out.numel, params=params, kind=kind, rank=x.rank,
                 axis=axis, has_zp=zp is not None, varying=[s != 0 for s in strides], ct=compute_type(out.dtype),
                 zct=compute_type(zp.dtype) if zp is not None else "i32", lo=f"{float(lo)}", hi=f"{float(hi)}",
                 value=value)


@lowering("QuantizeLinear")
def lower_quantize(ctx) -> None:
    x, scale = ctx.inputs[0], ctx.inputs[1]
    zp = ctx.inputs[2] if ctx.has_input(2) else None
    if zp is not None:
        dt = zp.dtype
    elif ctx.attr("output_dtype"):
        dt = tensor_dtype_to_np_dtype(ctx.attr("output_dtype")).name
    else:
        dt = "uint8"
    out = ctx.output(0, dt, x.shape)
    if dt in FLOAT_TARGETS:
        # ONNX's reference ignores the zero point of float8 outputs (it must be 0) and adds float4's
        value = "(f32(ld_x(gi)) / sc + z)" if dt == "float4_e2m1fn" else "(f32(ld_x(gi)) / sc)"
        if ctx.attr("saturate", 1):
            value = packed.saturate_expr(dt, value)
        _dispatch(ctx, "qf", x, scale, zp if dt == "float4_e2m1fn" else None, out, value=value)
        return
    if dt not in RANGES:
        raise ctx.unsupported(f"quantizing to {dt}")
    _dispatch(ctx, "q", x, scale, zp, out, RANGES[dt])


@lowering("DequantizeLinear")
def lower_dequantize(ctx) -> None:
    x, scale = ctx.inputs[0], ctx.inputs[1]
    zp = ctx.inputs[2] if ctx.has_input(2) else None
    if x.dtype in FLOAT_TARGETS:
        zp = None  # float8's must be 0; float4's is ignored by ONNX's reference
    elif x.dtype not in RANGES:
        raise ctx.unsupported(f"dequantizing {x.dtype}")
    dt = tensor_dtype_to_np_dtype(ctx.attr("output_dtype")).name if ctx.attr("output_dtype") else scale.dtype
    _dispatch(ctx, "dq", x, scale, zp, ctx.output(0, dt, x.shape))


@lowering("DynamicQuantizeLinear")
def lower_dynamic_quantize(ctx) -> None:
    x = ctx.inputs[0]
    scale = ctx.output(1, x.dtype, ())
    zp = ctx.output(2, "uint8", ())
    ctx.dispatch("quant.wgsl.j2", {"x": ctx.gpu(x)}, {"scale": scale, "zp": zp}, grid=(1, 1, 1), wg=STATS_WG,
                 params={"n": x.numel}, kind="stats")
    _dispatch(ctx, "q", x, scale, zp, ctx.output(0, "uint8", x.shape), RANGES["uint8"])
