"""A MatMul/Gemm weight written as ``DequantizeLinear(constant int4/uint4/int8/uint8, scale[, zero_point])`` ->
the packed ``nbits`` layout of webinfer's ``MatMulQ`` (the one onnxruntime's MatMulNBits uses, see
graph/contrib/quant.py), so the weight stays 4 (or 8) bits per value in the artifact and in GPU memory and
the quantized GEMV/GEMM kernels read it: ONNX's opset-21 way of storing quantized weights.

The codes are moved, never dequantized: transposed to N-major when the weight is [K, N], shifted to
unsigned (``q + 8`` for int4, ``q + 128`` for int8, the zero point moving with them) and packed low bits
first along K. Each block's (scale, zero point) becomes the kernels' affine pair (255 * scale,
-zero_point * scale), so ``w = (q - zero_point) * scale`` as DequantizeLinear defines it. Blocks run along
K: a blocked scale needs its blocks on the K axis with a power-of-two size of at least 32 (or a multiple of
32, then read in blocks of 32); per-tensor and per-column (N axis) scales become blocks of 128 along K.
Anything else is left to the DequantizeLinear kernel (the weight still stays packed: codegen/lower.py does
not fold a node that would widen a packed constant).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx_ir as ir

from .contrib.quant import MIN_BLOCK, _params
from .passes._util import const

_BITS = {"int4": 4, "uint4": 4, "int8": 8, "uint8": 8}
_SHIFT = {"int4": 8, "uint4": 0, "int8": 128, "uint8": 0}
PER_COLUMN_BLOCK = 128


@dataclass
class PackedWeight:
    source: ir.Value  # the quantized constant (packed words are shared between uses of it)
    words: np.ndarray  # uint32 [N, blocks * block * bits / 32]
    params: np.ndarray  # float32 [N, blocks, 2]
    fmt: str  # nbits4 | nbits8
    block: int
    k: int
    n: int


def dequantized_weight(value: ir.Value, n_major: bool) -> PackedWeight | None:
    """The packed form of ``value`` when a DequantizeLinear of constants produces it as a 2-D weight; ``n_major``:
    the weight is [N, K] (Gemm's transB, or under a Transpose), else [K, N] (MatMul's B)."""
    node = value.producer() if value is not None else None
    if node is None or node.op_type != "DequantizeLinear" or node.domain not in ("", "ai.onnx"):
        return None
    q, scale = const(node.inputs[0]), const(node.inputs[1])
    zp_value = node.inputs[2] if len(node.inputs) > 2 else None
    zp = const(zp_value) if zp_value is not None else None
    if q is None or scale is None or (zp_value is not None and zp is None) or q.ndim != 2:
        return None
    if q.dtype.name not in _BITS or scale.dtype != np.float32 or "output_dtype" in node.attributes:
        return None
    k_axis = 1 if n_major else 0
    n_axis = 1 - k_axis
    k, n = q.shape[k_axis], q.shape[n_axis]
    axis = node.attributes["axis"].as_int() if "axis" in node.attributes else 1
    axis = axis + 2 if axis < 0 else axis
    block = node.attributes["block_size"].as_int() if "block_size" in node.attributes else 0
    per_element = _per_element_block(scale, axis, block, k_axis, n_axis, k)
    if per_element is None:
        return None
    qb, expand = per_element
    blocks = -(-k // qb)
    scale_nb = _block_grid(scale, k_axis, n, blocks, qb, expand)
    zp_nb = _block_grid(zp, k_axis, n, blocks, qb, expand) if zp is not None else np.zeros((n, blocks), np.float32)
    shift = _SHIFT[q.dtype.name]
    codes = (q.T if not n_major else q).astype(np.int32) + shift
    bits = _BITS[q.dtype.name]
    return PackedWeight(node.inputs[0], _pack_rows(codes, blocks * qb, bits),
                        _params(scale_nb, zp_nb.astype(np.float32) + np.float32(shift)),
                        f"nbits{bits}", qb, int(k), int(n))


def _per_element_block(scale: np.ndarray, axis: int, block: int, k_axis: int, n_axis: int, k: int):
    """(block size along K the kernels use, how many of them one ONNX block spans), or None."""
    if scale.size == 1:
        return min(PER_COLUMN_BLOCK, _pow2_at_least(k)), None
    if block <= 0:
        return (min(PER_COLUMN_BLOCK, _pow2_at_least(k)), None) if scale.ndim == 1 and axis == n_axis else None
    if scale.ndim != 2 or axis != k_axis:
        return None
    if block >= MIN_BLOCK and block & (block - 1) == 0:
        return block, 1
    if block % MIN_BLOCK == 0:
        return MIN_BLOCK, block // MIN_BLOCK
    return None


def _pow2_at_least(k: int) -> int:
    p = MIN_BLOCK
    while p < k:
        p *= 2
    return p


def _block_grid(a: np.ndarray, k_axis: int, n: int, blocks: int, qb: int, expand: int | None) -> np.ndarray:
    """A scale or zero point as [N, blocks] of the kernels' blocks."""
    a = a.astype(np.float32)
    if expand is None:  # per tensor or per column: the same value in every block of a column
        return np.broadcast_to(a.reshape(-1, 1) if a.size == n else a.reshape(1, 1), (n, blocks)).copy()
    per_block = a.T if k_axis == 0 else a  # [N, ONNX blocks]
    return np.repeat(per_block, expand, axis=1)[:, :blocks]


def _pack_rows(codes: np.ndarray, kp: int, bits: int) -> np.ndarray:
    """Unsigned codes [N, K] -> u32 words [N, kp * bits / 32], value k + e in bits e * bits of its word."""
    n, k = codes.shape
    padded = np.zeros((n, kp), np.uint8)
    padded[:, :k] = codes.astype(np.uint8)
    if bits == 4:
        padded = (padded[:, 0::2] | (padded[:, 1::2] << 4)).astype(np.uint8)
    return np.ascontiguousarray(padded).view("<u4").astype(np.uint32)
