"""BitCast: each element's bits read as another type of the same width, through the u32 bit pattern (WGSL
values' own bits for 32-bit types; the stored code for float16, narrow and packed types)."""

from __future__ import annotations

from ...dtypes import dtype as get_dtype
from .. import packed
from ..registry import lowering
from .elementwise import elementwise


@lowering("BitCast")
def lower_bitcast(ctx) -> None:
    """Reinterpret each element's bits as another type of the same width (the WGSL value's own bits for 32-bit
    types; the stored code for narrow and packed ones)."""
    from onnx.helper import tensor_dtype_to_np_dtype

    x = ctx.inputs[0]
    dst = tensor_dtype_to_np_dtype(ctx.attr("to")).name
    src_bits, dst_bits = element_bits(x.dtype), element_bits(dst)
    if src_bits != dst_bits:
        raise ctx.unsupported(f"{x.dtype} and {dst} differ in size")
    if src_bits == 64:
        raise ctx.unsupported(f"{x.dtype} -> {dst}: 64-bit types live as 32-bit values on the GPU")
    build = lambda c, a, it, ot: from_bits(to_bits(a[0], x.dtype), dst)  # noqa: E731
    elementwise(ctx, build, [x], ctx.output(0, dst, x.shape))


def element_bits(dtype: str) -> int:
    d = get_dtype(dtype)
    return d.bits if d.packed else d.host_size * 8


def to_bits(v: str, dtype: str) -> str:
    """A u32 holding the ONNX bit pattern of a loaded ``dtype`` value (zero above the type's width)."""
    d, width = get_dtype(dtype), element_bits(dtype)
    mask = f"{(1 << width) - 1}u" if width < 32 else ""
    if d.packed:
        return f"({packed.encode_expr(dtype, v)} & {mask})"
    if dtype == "float16":
        return f"(enc_f16({v}) & {mask})"
    if d.compute == "bool":
        return f"select(0u, 1u, {v})"
    u = f"bitcast<u32>({v})" if d.compute != "u32" else v
    return f"({u} & {mask})" if mask else u


def from_bits(u: str, dtype: str) -> str:
    """The ``dtype`` value (compute type) whose ONNX bit pattern is the u32 ``u``."""
    d, width = get_dtype(dtype), element_bits(dtype)
    if d.packed:
        return packed.decode_expr(dtype, u)
    if dtype == "float16":
        return f"dec_f16({u})"
    if d.compute == "bool":
        return f"({u} != 0u)"
    if d.compute == "u32":
        return u
    if d.compute == "f32":
        return f"bitcast<f32>({u})"
    return f"(bitcast<i32>({u} << {32 - width}u) >> {32 - width}u)" if width < 32 else f"bitcast<i32>({u})"
