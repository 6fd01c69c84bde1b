"""com.microsoft ``FusedMatMul``: onnxruntime's optimizer folds a Transpose and a scalar Mul into a MatMul.
Written back as ``Transpose`` (of A, of B, where asked) + ``MatMul`` + ``Mul(alpha)``, so the usual passes
see them: sink_transposes and the epilogue fusion take them apart again as they fit webinfer's kernels.

onnxruntime's permutations (contrib_ops/cpu/math/fused_matmul): ``transA`` swaps the last two dims;
``transBatchA`` moves dim 0 (the batch) to just before the last two, i.e. [1 .. r-2, 0, r-1] (with transA:
[1 .. r-2, r-1, 0]); the same for B. transBatch needs a known rank of at least 3.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from . import Builder, expansion


def _perm(rank: int, trans: bool, trans_batch: bool) -> list[int] | None:
    if trans_batch:
        inner = [0, rank - 1]
        return list(range(1, rank - 1)) + (inner[::-1] if trans else inner)
    if trans:
        return list(range(rank - 2)) + [rank - 1, rank - 2]
    return None


def _operand(b: Builder, i: int, trans: bool, trans_batch: bool) -> ir.Value:
    x = b.input(i)
    if not (trans or trans_batch):
        return x
    rank = len(x.shape) if x.shape is not None else None
    if rank is None:
        raise b.unsupported(f"input {i}: a transposed operand of unknown rank")
    if rank < (3 if trans_batch else 2):
        if trans_batch:
            raise b.unsupported(f"input {i}: transBatch on rank {rank}")
        return x  # onnxruntime transposes nothing in a vector
    perm = _perm(rank, trans, trans_batch)
    shape = [x.shape[p] for p in perm] if x.shape is not None else None
    return b.op("Transpose", [x], {"perm": perm}, shape=shape)


@expansion("FusedMatMul")
def fused_matmul(node: ir.Node, b: Builder) -> list:
    """alpha * op(A) @ op(B)."""
    a = _operand(b, 0, bool(b.attr("transA", 0)), bool(b.attr("transBatchA", 0)))
    w = _operand(b, 1, bool(b.attr("transB", 0)), bool(b.attr("transBatchB", 0)))
    y = b.op("MatMul", [a, w], shape=node.outputs[0].shape)
    alpha = float(b.attr("alpha", 1.0))
    if alpha != 1.0:
        dt = y.dtype.numpy() if y.dtype is not None else np.float32
        y = b.op("Mul", [y, b.const(np.asarray(alpha, dt), "alpha")], shape=node.outputs[0].shape)
    return [y]
