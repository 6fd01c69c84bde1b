"""How each ONNX element type is stored on the GPU and on the host. Standard library only.

WGSL has 32-bit scalars (and f16 behind a feature), so 16-bit integers widen to 32 bits in GPU
memory: int64 lives as i32 (values outside i32 are refused where they enter), bool as u32 0/1, float64
as f32. ``compute`` is the WGSL type kernels compute in; ``storage`` the element type of the buffer.

The low-precision storage formats are *packed* instead (``bits`` < 32): bfloat16 holds 2 values per u32,
the float8 formats and int8/uint8 4 (quantized weights and activations stay a byte each), int4/uint4/float4e2m1 8 and int2/uint2 16, element ``i`` in bits
``[(i % per) * bits, ...)`` of word ``i / per`` (little-endian, the order of numpy's bytes). Kernels read
and write them through the prelude's accessors, which decode to ``compute`` and encode back in WGSL
(``codegen/packed.py``); the runtime packs and unpacks at the boundary. So weights stored as int4 stay
int4 in the artifact and in GPU memory.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    name: str  # ONNX name, as numpy spells it
    onnx: int  # onnx.TensorProto enum value
    host_format: str  # struct/array format code of the host representation
    host_size: int  # bytes per element on the host
    storage: str  # WGSL element type of the GPU buffer
    compute: str  # WGSL type kernels compute in
    bits: int = 32  # bits per element in GPU memory; < 32: packed into u32 words

    @property
    def packed(self) -> bool:
        return self.bits < 32

    @property
    def per_word(self) -> int:
        return 32 // self.bits


DTYPES: dict[str, DType] = {
    d.name: d
    for d in [
        DType("float32", 1, "f", 4, "f32", "f32"),
        DType("uint8", 2, "B", 1, "u32", "u32", 8),
        DType("int8", 3, "b", 1, "u32", "i32", 8),
        DType("uint16", 4, "H", 2, "u32", "u32"),
        DType("int16", 5, "h", 2, "i32", "i32"),
        DType("int32", 6, "i", 4, "i32", "i32"),
        DType("int64", 7, "q", 8, "i32", "i32"),
        DType("bool", 9, "?", 1, "u32", "bool"),
        DType("float16", 10, "e", 2, "f32", "f32"),
        DType("float64", 11, "d", 8, "f32", "f32"),
        DType("uint32", 12, "I", 4, "u32", "u32"),
        DType("uint64", 13, "Q", 8, "u32", "u32"),
        DType("bfloat16", 16, "H", 2, "u32", "f32", 16),
        DType("float8_e4m3fn", 17, "B", 1, "u32", "f32", 8),
        DType("float8_e4m3fnuz", 18, "B", 1, "u32", "f32", 8),
        DType("float8_e5m2", 19, "B", 1, "u32", "f32", 8),
        DType("float8_e5m2fnuz", 20, "B", 1, "u32", "f32", 8),
        DType("uint4", 21, "B", 1, "u32", "u32", 4),
        DType("int4", 22, "B", 1, "u32", "i32", 4),
        DType("float4_e2m1fn", 23, "B", 1, "u32", "f32", 4),
        DType("float8_e8m0fnu", 24, "B", 1, "u32", "f32", 8),
        DType("uint2", 25, "B", 1, "u32", "u32", 2),
        DType("int2", 26, "B", 1, "u32", "i32", 2),
    ]
}
BY_ONNX: dict[int, DType] = {d.onnx: d for d in DTYPES.values()}
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


def dtype(name: str) -> DType:
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError(f"element type {name} is not supported on the GPU") from None


def is_float(name: str) -> bool:
    return DTYPES[name].compute == "f32"


def gpu_nbytes(name: str, numel: int) -> int:
    """Bytes a tensor of ``numel`` elements occupies in GPU memory (whole 32-bit words)."""
    d = DTYPES[name]
    return -(-numel * d.bits // 32) * 4


def wide_dtype(name: str) -> str:
    """The 32-bit-per-element type a packed type computes as, for kernels that cannot read it packed."""
    d = DTYPES[name]
    if not d.packed:
        return name
    return {"f32": "float32", "i32": "int32", "u32": "uint32"}[d.compute]
