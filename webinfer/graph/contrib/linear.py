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

from .builder import Builder, expansion


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


def _rank(v: ir.Value) -> int | None:
    return len(v.shape) if v is not None and v.shape is not None else None


@expansion("FusedMatMul")
def fused_matmul(node: ir.Node, b: Builder) -> list:
    """alpha * op(A) @ op(B). Where a transposed operand's rank is not known yet (an optimized model saved
    without value infos), the product is ``Einsum('...ki,...jk->...ij')``, which a rank-free ellipsis states."""
    ta, tb = bool(b.attr("transA", 0)), bool(b.attr("transB", 0))
    batch = bool(b.attr("transBatchA", 0)) or bool(b.attr("transBatchB", 0))
    if not batch and ((ta and _rank(b.input(0)) is None) or (tb and _rank(b.input(1)) is None)):
        eq = f"...{'ki' if ta else 'ik'},...{'jk' if tb else 'kj'}->...ij"
        y = b.op("Einsum", [b.input(0), b.input(1)], {"equation": eq}, shape=node.outputs[0].shape)
    else:
        a = _operand(b, 0, ta, bool(b.attr("transBatchA", 0)))
        w = _operand(b, 1, tb, bool(b.attr("transBatchB", 0)))
        y = b.op("MatMul", [a, w], shape=node.outputs[0].shape)
    alpha = float(b.attr("alpha", 1.0))
    if alpha != 1.0:
        dt = y.dtype.numpy() if y.dtype is not None else np.float32
        y = b.op("Mul", [y, b.const(np.asarray(alpha, dt), "alpha")], shape=node.outputs[0].shape)
    return [y]


_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


@expansion("FusedConv")
def fused_conv(node: ir.Node, b: Builder) -> list:
    """onnxruntime's Conv + activation (X, W, B?, Z?): Conv, + Z (a residual summed before the activation),
    then the activation named by ``activation`` with ``activation_params``; the epilogue pass fuses them back."""
    attrs = {k: b.attr(k) for k in _CONV_ATTRS if b.attr(k) is not None}
    shape = node.outputs[0].shape
    inputs = [b.input(0), b.input(1)] + ([b.input(2)] if b.input(2) is not None else [])
    y = b.op("Conv", inputs, attrs, shape=shape)
    if b.input(3) is not None:
        y = b.op("Add", [y, b.input(3)], shape=shape)
    act = b.attr("activation")
    act = act.decode() if isinstance(act, bytes) else act
    params = [float(v) for v in (b.attr("activation_params") or [])]
    if act is None:
        return [y]
    if act in ("Relu", "Tanh", "Sigmoid"):
        return [b.op(act, [y], shape=shape)]
    if act == "LeakyRelu":
        return [b.op(act, [y], {"alpha": params[0] if params else 0.01}, shape=shape)]
    if act == "HardSigmoid":
        alpha, beta = params if len(params) == 2 else (0.2, 0.5)
        return [b.op(act, [y], {"alpha": alpha, "beta": beta}, shape=shape)]
    if act == "Clip" and len(params) == 2:
        dt = y.dtype.numpy() if y.dtype is not None else np.float32
        lo, hi = (b.const(np.asarray(v, dt), n) for v, n in zip(params, ("min", "max")))
        return [b.op("Clip", [y, lo, hi], shape=shape)]
    raise b.unsupported(f"activation {act!r}")
