"""QuantizeLinear, DequantizeLinear (per-tensor, per-axis, blocked) and DynamicQuantizeLinear.

One elementwise kernel: each element finds its scale (and zero point) by its coordinates, where the
quantized axis coordinate is divided by the block size (1 for per-axis) and axes the scale does not
have contribute nothing. Quantizing rounds half to even (WGSL ``round``) and saturates to the output
type's range. DynamicQuantizeLinear first reduces min/max in one workgroup, then quantizes.
"""

from __future__ import annotations

from onnx.helper import tensor_dtype_to_np_dtype

from ... import dims as D
from ..registry import lowering
from .helpers import compute_type, contiguous_strides, normalize_axis

RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767),
          "int32": (-2147483648, 2147483647)}
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


def _dispatch(ctx, kind, x, scale, zp, out, ranges=(0, 0)) -> None:
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
                 zct=compute_type(zp.dtype) if zp is not None else "i32", lo=f"{float(lo)}", hi=f"{float(hi)}")


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
    if dt not in RANGES:
        raise ctx.unsupported(f"quantizing to {dt}")
    _dispatch(ctx, "q", x, scale, zp, ctx.output(0, dt, x.shape), RANGES[dt])


@lowering("DequantizeLinear")
def lower_dequantize(ctx) -> None:
    x, scale = ctx.inputs[0], ctx.inputs[1]
    zp = ctx.inputs[2] if ctx.has_input(2) else None
    if x.dtype not in RANGES:
        raise ctx.unsupported(f"dequantizing {x.dtype}")
    _dispatch(ctx, "dq", x, scale, zp, ctx.output(0, scale.dtype, x.shape))


@lowering("DynamicQuantizeLinear")
def lower_dynamic_quantize(ctx) -> None:
    x = ctx.inputs[0]
    scale = ctx.output(1, x.dtype, ())
    zp = ctx.output(2, "uint8", ())
    ctx.dispatch("quant.wgsl.j2", {"x": ctx.gpu(x)}, {"scale": scale, "zp": zp}, grid=(1, 1, 1), wg=STATS_WG,
                 params={"n": x.numel}, kind="stats")
    _dispatch(ctx, "q", x, scale, zp, ctx.output(0, "uint8", x.shape), RANGES["uint8"])
