"""How each ONNX element type is stored on the GPU and on the host. Standard library only.

WGSL has 32-bit scalars (and f16 behind a feature), so narrow and wide integers widen to 32 bits in GPU
memory: int64 lives as i32 (values outside i32 are refused where they enter), bool as u32 0/1, float64
as f32. ``compute`` is the WGSL type kernels compute in; ``storage`` the element type of the buffer.
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
    gpu_size: int = 4


DTYPES: dict[str, DType] = {
    d.name: d
    for d in [
        DType("float32", 1, "f", 4, "f32", "f32"),
        DType("uint8", 2, "B", 1, "u32", "u32"),
        DType("int8", 3, "b", 1, "i32", "i32"),
        DType("uint16", 4, "H", 2, "u32", "u32"),
        DType("int16", 5, "h", 2, "i32", "i32"),
        DType("int32", 6, "i", 4, "i32", "i32"),
        DType("int64", 7, "q", 8, "i32", "i32"),
        DType("bool", 9, "?", 1, "u32", "bool"),
        DType("float16", 10, "e", 2, "f32", "f32"),
        DType("float64", 11, "d", 8, "f32", "f32"),
        DType("uint32", 12, "I", 4, "u32", "u32"),
        DType("uint64", 13, "Q", 8, "u32", "u32"),
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
