"""MatMulNBits and GatherBlockQuantized -> webinfer's MatMulQ / GatherQ over the model's own packed weights.

onnxruntime's block-quantized weights are N-major like ours (row ``n`` holds output column ``n``'s K values)
and packed along K, low bits first: for 4 bits, byte ``i`` of a row holds value ``2i`` in its low nibble and
``2i + 1`` in its high nibble. Read as little-endian u32 words, that is our ``nbits4`` format (8 values per
word, nibble ``e`` holds value ``k + e``); 8 bits is ``nbits8`` (4 bytes per word). The bytes are used as
they are: nothing is dequantized or re-quantized. Only the per-block scale and zero point become our
affine block parameters, ``w = q * scale - zero_point * scale``, stored as (255 * scale, -zero_point * scale)
so the kernels can use the same ``unpack4x8unorm`` arithmetic as for int4. Blocks of 32 or more values
(powers of two) along K are supported.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ...opschema import WEBINFER_DOMAIN
from ..passes._util import const
from .builder import Builder, expansion

FORMATS = {4: "nbits4", 8: "nbits8"}
MIN_BLOCK = 32


def const_through_views(value: ir.Value | None) -> tuple[np.ndarray, ir.Value] | None:
    """The value of a constant, also through Reshape/Identity of one: (array, the source constant)."""
    arr = const(value)
    if arr is not None:
        return arr, value
    node = value.producer() if value is not None else None
    if node is None or node.domain != "" or node.op_type not in ("Reshape", "Identity"):
        return None
    found = const_through_views(node.inputs[0])
    if found is None:
        return None
    if node.op_type == "Identity":
        return found
    shape = const(node.inputs[1])
    if shape is None:
        return None
    src = found[0]
    dims = [src.shape[i] if d == 0 else int(d) for i, d in enumerate(shape.tolist())]
    return src.reshape(dims), found[1]


def _check_block(b: Builder, bits: int, block: int) -> str:
    if bits not in FORMATS:
        raise b.unsupported(f"{bits}-bit weights (4 and 8 are supported)")
    if block < MIN_BLOCK or block & (block - 1):
        raise b.unsupported(f"block_size {block} (powers of two from {MIN_BLOCK} are supported)")
    return FORMATS[bits]


def _zero_points(b: Builder, zp_value: ir.Value | None, rows: int, blocks: int, bits: int, default: float):
    """Per-block zero points [rows, blocks] as float: packed uint8 (bits per value, low first), float, or none."""
    if zp_value is None:
        return np.full((rows, blocks), default, np.float32)
    found = const_through_views(zp_value)
    if found is None:
        raise b.unsupported("zero_points must be a constant")
    zp = found[0]
    if zp.dtype.kind == "f":
        return zp.astype(np.float32).reshape(rows, blocks)
    zp = zp.astype(np.uint8).reshape(rows, -1)
    if bits == 8:
        return zp[:, :blocks].astype(np.float32)
    unpacked = np.stack([zp & 15, zp >> 4], axis=-1).reshape(rows, -1)
    return unpacked[:, :blocks].astype(np.float32)


def quant_params(scales: np.ndarray, zp: np.ndarray) -> np.ndarray:
    """(255 * scale, -zero_point * scale) per block: the kernels compute q/255 * p0 + p1."""
    s = scales.astype(np.float32)
    return np.stack([s * np.float32(255.0), -zp * s], axis=-1).astype(np.float32)


def _packed(b: Builder, source: ir.Value, data: np.ndarray, rows: int) -> ir.Value:
    """The weight bytes as u32 words [rows, bytes / 4], one initializer per source tensor."""
    key = ("words", id(source), rows)
    if key not in b.cache:
        raw = np.ascontiguousarray(data).view(np.uint8).reshape(rows, -1)
        if raw.shape[1] % 4:
            raise b.unsupported(f"rows of {raw.shape[1]} bytes are not whole 32-bit words")
        b.cache[key] = b.const(raw.view("<u4").astype(np.uint32), "words")
    return b.cache[key]


def _block_params(b: Builder, scales_value: ir.Value, zp_value, rows: int, blocks: int, bits: int,
                  default_zp: float) -> ir.Value:
    found = const_through_views(scales_value)
    if found is None:
        raise b.unsupported("scales must be a constant")
    key = ("params", id(found[1]), id(zp_value), rows, blocks, bits, default_zp)
    if key not in b.cache:
        scales = found[0].astype(np.float32).reshape(rows, blocks)
        zp = _zero_points(b, zp_value, rows, blocks, bits, default_zp)
        b.cache[key] = b.const(quant_params(scales, zp), "block_params")
    return b.cache[key]


@expansion("MatMulNBits")
def matmul_nbits(node: ir.Node, b: Builder) -> list:
    """A @ dequant(B) (+ bias) -> webinfer.MatMulQ(A, words, params, bias?) in nbits format."""
    k, n = int(b.attr("K")), int(b.attr("N"))
    bits, block = int(b.attr("bits", 4)), int(b.attr("block_size"))
    fmt = _check_block(b, bits, block)
    if int(b.attr("weight_prepacked", 0)):
        raise b.unsupported("weights prepacked for a CUDA layout")
    blocks = -(-k // block)
    found = const_through_views(b.input(1))
    if found is None:
        raise b.unsupported("the weight B must be a constant")
    data, source = found
    if data.dtype != np.uint8 or data.size != n * blocks * block * bits // 8:
        raise b.unsupported(f"B of shape {list(data.shape)} is not [N, k_blocks, blob] uint8")
    g_idx = b.input(4)
    if g_idx is not None:
        gi = const(g_idx)
        if gi is None or not np.array_equal(gi.reshape(-1)[:k], np.arange(k) // block):
            raise b.unsupported("a g_idx that reorders K (act-order) is not supported")
    words = _packed(b, source, data, n)
    params = _block_params(b, b.input(2), b.input(3), n, blocks, bits, float(2 ** (bits - 1)))
    x = b.input(0)
    inputs = [x, words, params] + ([b.input(5)] if b.input(5) is not None else [])
    shape = list(x.shape.dims[:-1]) + [n] if x.shape is not None else None
    return [b.op("MatMulQ", inputs, {"format": fmt, "k": k, "n": n, "block": block}, domain=WEBINFER_DOMAIN,
                 dtype=x.dtype, shape=shape)]


def _as_uint8_rows(b: Builder, data: np.ndarray, bits: int) -> tuple[np.ndarray, float]:
    """Packed uint8 rows, and the zero point's shift: int4/uint4 tensors are packed here (losslessly)."""
    if data.dtype == np.uint8:
        return data.reshape(data.shape[0], -1), 0.0
    kind = data.dtype.name
    if bits != 4 or kind not in ("int4", "uint4"):
        raise b.unsupported(f"data of type {kind}")
    q = data.astype(np.int16).reshape(data.shape[0], -1)
    shift = 8.0 if kind == "int4" else 0.0  # signed values move to 0..15; the zero point moves with them
    q = (q + int(shift)).astype(np.uint8)
    if q.shape[1] % 2:
        q = np.pad(q, ((0, 0), (0, 1)))
    return (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8), shift


@expansion("GatherBlockQuantized")
def gather_block_quantized(node: ir.Node, b: Builder) -> list:
    """Rows of a block-quantized table (an embedding) -> webinfer.GatherQ(words, params, indices)."""
    bits, block = int(b.attr("bits", 4)), int(b.attr("block_size", 128))
    found = const_through_views(b.input(0))
    if found is None:
        raise b.unsupported("data must be a constant")
    data, source = found
    if data.ndim != 2:
        raise b.unsupported(f"data of rank {data.ndim} (2-D tables are supported)")
    if int(b.attr("gather_axis", 0)) != 0 or int(b.attr("quantize_axis", 1)) not in (1, -1):
        raise b.unsupported("only gather_axis 0 with quantize_axis 1 (rows of a table) is supported")
    fmt = _check_block(b, bits, block)
    rows_u8, shift = _as_uint8_rows(b, data, bits)
    vocab = data.shape[0]
    k = data.shape[1] * (8 // bits) if data.dtype == np.uint8 else data.shape[1]
    blocks = -(-k // block)
    default_zp = float(2 ** (bits - 1)) if data.dtype == np.uint8 else 0.0
    zp_value = b.input(3)
    if shift and zp_value is not None:
        raise b.unsupported("zero points with signed int4 data")
    words = _packed(b, source if data.dtype == np.uint8 else b.input(0), rows_u8, vocab)
    params = _block_params(b, b.input(2), zp_value, vocab, blocks, bits, default_zp + shift)
    idx = b.input(1)
    shape = list(idx.shape.dims) + [k] if idx.shape is not None else None
    return [b.op("GatherQ", [words, params, idx], {"format": fmt, "k": k, "block": block},
                 domain=WEBINFER_DOMAIN, dtype=b.input(2).dtype, shape=shape)]
