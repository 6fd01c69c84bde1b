"""Host tensors and their conversion to and from GPU storage, with the standard library only.

On the GPU most elements are 32 bits (see ``dtypes``); here we widen and narrow with ``array`` and
``struct``, refusing int64 values that do not fit the i32 they become. Packed types (bfloat16, float8,
4- and 2-bit) keep their codes: the host holds one code per byte (two bytes for bfloat16), as numpy /
ml_dtypes do, and the GPU several per 32-bit word; ``bytes.translate`` and big-integer ORs move them.
"""

from __future__ import annotations

import struct
from array import array

from ..dtypes import DTYPES, I32_MAX, I32_MIN
from ..errors import WebinferError

_NUMPY_FORMATS = {"f": "float32", "d": "float64", "e": "float16", "i": "int32", "l": "int64", "q": "int64",
                  "b": "int8", "B": "uint8", "h": "int16", "H": "uint16", "I": "uint32", "L": "uint64",
                  "Q": "uint64", "?": "bool"}


class HostTensor:
    """A tensor on the host when numpy is not available (Pyodide): dtype name, shape, raw bytes."""

    def __init__(self, dtype: str, shape, data: bytes):
        self.dtype, self.shape, self.data = dtype, tuple(int(d) for d in shape), bytes(data)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def tolist(self) -> list:
        d = DTYPES[self.dtype]
        if d.packed and d.compute != "f32":  # int4/uint4/int2/uint2 codes, sign-extended where signed
            half = 1 << (d.bits - 1)
            return [c - 2 * half if d.compute == "i32" and c >= half else c for c in self.data]
        fmt = d.host_format
        if fmt == "e":
            return [v[0] for v in struct.iter_unpack("<e", self.data)]
        if fmt == "?":
            return [bool(b) for b in self.data]
        return list(array(fmt, self.data))

    def __repr__(self) -> str:
        return f"HostTensor({self.dtype}, {list(self.shape)})"


def as_host(value, name: str) -> HostTensor:
    """Accept a numpy array (without importing numpy), a HostTensor, or a typed memoryview."""
    if isinstance(value, HostTensor):
        return value
    if hasattr(value, "dtype") and hasattr(value, "shape") and hasattr(value, "tobytes"):
        dt = str(value.dtype)
        if dt not in DTYPES:
            raise WebinferError(f"feed {name!r}: element type {dt} is not supported")
        return HostTensor(dt, value.shape, value.tobytes(order="C"))
    if isinstance(value, memoryview):
        fmt = value.format.lstrip("<=@")
        if fmt not in _NUMPY_FORMATS:
            raise WebinferError(f"feed {name!r}: memoryview format {value.format!r} is not supported")
        return HostTensor(_NUMPY_FORMATS[fmt], value.shape or (), value.tobytes())
    raise WebinferError(f"feed {name!r}: expected an array, got {type(value).__name__}")


def to_gpu_bytes(t: HostTensor, name: str) -> bytes:
    """Host bytes -> 32-bit GPU storage bytes."""
    d = DTYPES[t.dtype]
    if d.packed:
        return _pad_words(pack_codes(t.data, d.bits) if d.bits < 8 else t.data)
    fmt = d.host_format
    if fmt in ("f", "i", "I"):
        return t.data
    if fmt == "e":
        return array("f", [v[0] for v in struct.iter_unpack("<e", t.data)]).tobytes()
    if fmt == "d":
        return array("f", array("d", t.data)).tobytes()
    if fmt == "?":
        return array("I", array("B", t.data)).tobytes()
    src = array(fmt, t.data)
    if fmt in ("q", "Q") and len(src):
        lo, hi = min(src), max(src)
        if lo < I32_MIN or hi > I32_MAX:
            raise WebinferError(
                f"feed {name!r}: {t.dtype} value {hi if hi > I32_MAX else lo} is outside the int32 range "
                "that int64 tensors have on the GPU"
            )
    return array("i" if d.storage == "i32" else "I", src).tobytes()


def from_gpu_bytes(dtype: str, data: bytes, numel: int) -> bytes:
    """GPU storage bytes -> host bytes of ``dtype``."""
    d = DTYPES[dtype]
    if d.packed:
        return unpack_codes(data, d.bits, numel) if d.bits < 8 else data[: numel * d.host_size]
    data = data[: numel * 4]
    fmt = d.host_format
    if fmt in ("f", "i", "I"):
        return data
    if fmt == "e":
        vals = array("f", data)
        return struct.pack(f"<{len(vals)}e", *[_to_half_range(v) for v in vals])
    if fmt == "d":
        return array("d", array("f", data)).tobytes()
    if fmt == "?":
        return bytes(1 if v else 0 for v in array("I", data))
    src = array("i" if d.storage == "i32" else "I", data)
    if fmt in ("B", "b", "H", "h"):
        mask = (1 << (8 * d.host_size)) - 1
        src = [v & mask for v in src]
        if fmt in ("b", "h"):
            half = 1 << (8 * d.host_size - 1)
            src = [v - 2 * half if v >= half else v for v in src]
    return array(fmt, src).tobytes()


def pack_codes(codes: bytes, bits: int) -> bytes:
    """One code per byte -> 8 // bits codes per byte, the first in the lowest bits."""
    per = 8 // bits
    n = -(-len(codes) // per)
    acc = 0
    for k in range(per):
        part = codes[k::per].translate(_shift_table(bits, k, pack=True))
        acc |= int.from_bytes(part, "little")
    return acc.to_bytes(n, "little")


def unpack_codes(data: bytes, bits: int, numel: int) -> bytes:
    """The inverse of ``pack_codes``: ``numel`` codes, one per byte."""
    per = 8 // bits
    out = bytearray(numel)
    for k in range(per):
        count = len(range(k, numel, per))
        out[k::per] = data[:count].translate(_shift_table(bits, k, pack=False))
    return bytes(out)


_TABLES: dict[tuple, bytes] = {}


def _shift_table(bits: int, k: int, pack: bool) -> bytes:
    key = (bits, k, pack)
    if key not in _TABLES:
        mask = (1 << bits) - 1
        _TABLES[key] = bytes(((b & mask) << (k * bits)) if pack else ((b >> (k * bits)) & mask) for b in range(256))
    return _TABLES[key]


def _pad_words(data: bytes) -> bytes:
    return data + b"\0" * ((-len(data)) % 4)


def _to_half_range(v: float) -> float:
    if v != v or abs(v) <= 65504.0:
        return v
    return float("inf") if v > 0 else float("-inf")


def check_index_bounds(bounds: dict, feeds: dict) -> None:
    """Indices fed to a table (token ids into the embedding) must lie in [-rows, rows), as ONNX's Gather
    requires; a GPU gather would otherwise read another row silently (``manifest["index_bounds"]``)."""
    for name, rows in bounds.items():
        t = feeds.get(name)
        if t is None or not t.data or DTYPES[t.dtype].host_format not in ("q", "Q", "i", "I", "h", "H", "b", "B"):
            continue
        values = array(DTYPES[t.dtype].host_format, t.data)
        lo, hi = min(values), max(values)
        if lo < -rows or hi >= rows:
            bad = hi if hi >= rows else lo
            raise WebinferError(f"input {name!r}: index {bad} is out of range for a table of {rows} rows "
                                f"(valid: 0..{rows - 1})")


class IOInfo:
    """What ``get_inputs()``/``get_outputs()`` return, shaped like onnxruntime's NodeArg."""

    def __init__(self, name: str, dtype: str, shape: list):
        self.name, self.dtype, self.shape = name, dtype, shape
        self.type = f"tensor({ {'float32': 'float', 'float64': 'double'}.get(dtype, dtype)})"

    def __repr__(self) -> str:
        return f"IOInfo(name={self.name!r}, type={self.type!r}, shape={self.shape})"
