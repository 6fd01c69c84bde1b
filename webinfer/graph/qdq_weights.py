"""A MatMul/Gemm weight written as ``DequantizeLinear(constant int4/uint4/int8/uint8, scale[, zero_point])`` ->
the packed ``nbits`` layout of webinfer's ``MatMulQ``; so is ``Cast(constant int8/uint8) [- zero point] [* scale]``,
the way some exporters store int8 weights without DequantizeLinear (the one onnxruntime's MatMulNBits uses, see
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

from .contrib.quant import MIN_BLOCK, quant_params
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
    if node is None or node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type != "DequantizeLinear":
        found = _cast_dequantized(value, n_major)
        return _packed(*found, n_major) if found is not None else None
    q, scale = const(node.inputs[0]), const(node.inputs[1])
    zp_value = node.inputs[2] if len(node.inputs) > 2 else None
    zp = const(zp_value) if zp_value is not None else None
    if q is None or scale is None or (zp_value is not None and zp is None) or q.ndim != 2:
        return None
    if q.dtype.name not in _BITS or scale.dtype != np.float32 or "output_dtype" in node.attributes:
        return None
    axis = node.attributes["axis"].as_int() if "axis" in node.attributes else 1
    block = node.attributes["block_size"].as_int() if "block_size" in node.attributes else 0
    return _packed(node.inputs[0], q, scale, zp, axis + 2 if axis < 0 else axis, block, n_major)


def _cast_dequantized(value: ir.Value, n_major: bool):
    """``Cast(q) [- zero_point] [* scale]`` of constants (int8/uint8/int4 codes, a scale per tensor or per
    output column, the weights of models that store them so) as DequantizeLinear's (source, q, scale, zero
    point, axis, block); None for anything else."""
    node = value.producer()
    scale = np.ones((), np.float32)
    if node.op_type == "Mul":
        a, b = node.inputs
        side = [v for v in (a, b) if const(v) is not None]
        if len(side) != 1:
            return None
        scale = const(side[0])
        node = (b if side[0] is a else a).producer()
    zp = None
    if node is not None and node.op_type == "Sub" and node.domain in ("", "ai.onnx"):
        zp = const(node.inputs[1])
        node = node.inputs[0].producer() if zp is not None else None
    if node is None or node.op_type != "Cast" or node.domain not in ("", "ai.onnx"):
        return None
    q = const(node.inputs[0])
    if q is None or q.ndim != 2 or node.attributes["to"].as_int() != ir.DataType.FLOAT.value:
        return None
    n_axis = 0 if n_major else 1
    per_column = [1, 1]
    per_column[n_axis] = q.shape[n_axis]
    scale, zp = (None if v is None else np.asarray(v) for v in (scale, zp))
    for v in (scale, zp):
        if v is not None and v.size > 1 and not (v.size == q.shape[n_axis] and (
                (v.ndim == 1 and n_axis == 1) or (v.ndim == 2 and list(v.shape) == per_column))):
            return None  # not one value per tensor or per output column
    if scale.dtype != np.float32 or (zp is not None and zp.dtype.kind != "f" and zp.dtype != q.dtype):
        return None
    if zp is not None and zp.dtype.kind == "f":
        if not np.array_equal(zp, np.rint(zp)):
            return None
        zp = zp.astype(np.int32)
    return node.inputs[0], q, scale.reshape(-1) if scale.size > 1 else scale.reshape(()), \
        (zp.reshape(-1) if zp.size > 1 else zp.reshape(())) if zp is not None else None, n_axis, 0


def _packed(source: ir.Value, q: np.ndarray, scale: np.ndarray, zp: np.ndarray | None, axis: int, block: int,
            n_major: bool) -> PackedWeight | None:
    if q.dtype.name not in _BITS:
        return None
    k_axis = 1 if n_major else 0
    n_axis = 1 - k_axis
    k, n = q.shape[k_axis], q.shape[n_axis]
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
    return PackedWeight(source, _pack_rows(codes, blocks * qb, bits),
                        quant_params(scale_nb, zp_nb.astype(np.float32) + np.float32(shift)),
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
