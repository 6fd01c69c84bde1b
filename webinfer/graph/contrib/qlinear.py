"""onnxruntime's quantized operators (``QLinearAdd``, ``QGemm``, ...) as the Q/DQ form they stand for:
``DequantizeLinear`` of each quantized input, the float op, ``QuantizeLinear`` of the result. That is how
onnxruntime's quantizer defines them (it fuses a QDQ group into one of these), and it lets the usual
machinery run them: a constant weight under DequantizeLinear stays packed (graph/qdq_weights.py), the float
op fuses as any other, and QuantizeLinear rounds half to even and saturates as ONNX defines.

onnxruntime computes some of these in its own order (QLinearAdd as ``(a - za) * sa/sc + (b - zb) * sb/sc``,
QLinearSigmoid by a table): an output can sit one code away where the exact value is a rounding tie.

``MatMulIntegerToFloat`` / ``DynamicQuantizeMatMul`` (onnxruntime's fusions of the dynamic quantizer's output)
become that output again: (DynamicQuantizeLinear,) MatMulInteger, Cast, Mul by the product of the scales.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from .builder import Builder, expansion

FLOAT = ir.DataType.FLOAT


def _dq(b: Builder, x: ir.Value, scale: ir.Value, zp: ir.Value | None, axis: int | None = None) -> ir.Value:
    attrs = {"axis": axis} if axis is not None else None
    return b.op("DequantizeLinear", [x, scale] + ([zp] if zp is not None else []), attrs, dtype=scale.dtype or FLOAT,
                shape=x.shape)


def _q(b: Builder, y: ir.Value, scale: ir.Value, zp: ir.Value | None, like: ir.Value) -> ir.Value:
    """Quantize to ``zp``'s type, or (no zero point) to the type of the quantized input ``like``."""
    if zp is None:
        dt = like.dtype.numpy() if like.dtype is not None else np.uint8
        zp = b.const(np.zeros((), dt), "zero_point")
    return b.op("QuantizeLinear", [y, scale, zp], dtype=zp.dtype or like.dtype, shape=y.shape)


def _unary(b: Builder, fn) -> list:
    """(X, X_scale, X_zero_point?, Y_scale, Y_zero_point?) -> Q(fn(DQ(X)))."""
    x = b.input(0)
    return [_q(b, fn(_dq(b, x, b.input(1), b.input(2))), b.input(3), b.input(4), x)]


def _binary(op: str):
    def expand(node: ir.Node, b: Builder) -> list:
        """(A, A_scale, A_zp?, B, B_scale, B_zp?, C_scale, C_zp?) -> Q(DQ(A) op DQ(B))."""
        a = _dq(b, b.input(0), b.input(1), b.input(2))
        c = _dq(b, b.input(3), b.input(4), b.input(5))
        return [_q(b, b.op(op, [a, c]), b.input(6), b.input(7), b.input(0))]
    return expand


expansion("QLinearAdd")(_binary("Add"))
expansion("QLinearMul")(_binary("Mul"))


@expansion("QLinearSigmoid")
def qlinear_sigmoid(node: ir.Node, b: Builder) -> list:
    return _unary(b, lambda v: b.op("Sigmoid", [v]))


@expansion("QLinearLeakyRelu")
def qlinear_leaky_relu(node: ir.Node, b: Builder) -> list:
    alpha = float(b.attr("alpha", 0.01))
    return _unary(b, lambda v: b.op("LeakyRelu", [v], {"alpha": alpha}, shape=v.shape))


def _channels_first(b: Builder) -> None:
    if int(b.attr("channels_last", 0)):
        raise b.unsupported("channels_last pooling")


@expansion("QLinearGlobalAveragePool")
def qlinear_global_average_pool(node: ir.Node, b: Builder) -> list:
    _channels_first(b)
    return _unary(b, lambda v: b.op("GlobalAveragePool", [v], shape=node.outputs[0].shape))


@expansion("QLinearAveragePool")
def qlinear_average_pool(node: ir.Node, b: Builder) -> list:
    _channels_first(b)
    keys = ("auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides")
    attrs = {k: b.attr(k) for k in keys if b.attr(k) is not None}
    return _unary(b, lambda v: b.op("AveragePool", [v], attrs, shape=node.outputs[0].shape))


@expansion("QLinearSoftmax")
def qlinear_softmax(node: ir.Node, b: Builder) -> list:
    x = b.input(0)
    axis = int(b.attr("axis", -1))
    rank = len(x.shape) if x.shape is not None else None
    if axis != -1 and (rank is None or axis != rank - 1):
        raise b.unsupported(f"softmax over axis {axis} (the last axis is supported)")
    return _unary(b, lambda v: b.op("Softmax", [v], {"axis": -1}))


@expansion("QLinearConcat")
def qlinear_concat(node: ir.Node, b: Builder) -> list:
    """(Y_scale, Y_zp, then (X, X_scale, X_zp) per input) -> Q(Concat(DQ(X)...))."""
    ins = list(node.inputs)
    if (len(ins) - 2) % 3:
        raise b.unsupported("inputs are not (tensor, scale, zero point) triples")
    parts = [_dq(b, ins[i], ins[i + 1], ins[i + 2]) for i in range(2, len(ins), 3)]
    y = b.op("Concat", parts, {"axis": int(b.attr("axis"))}, shape=node.outputs[0].shape)
    return [_q(b, y, ins[0], ins[1], ins[2])]


@expansion("QGemm")
def qgemm(node: ir.Node, b: Builder) -> list:
    """(A, a_scale, a_zp, B, b_scale, b_zp, C?, y_scale?, y_zp?): Gemm of the dequantized A and B; C is an int32
    bias at scale a_scale * b_scale; without y_scale the output is the float result."""
    trans_b = int(b.attr("transB", 0))
    b_scale = b.input(4)
    per_column = b_scale.shape is not None and len(b_scale.shape) == 1 and b_scale.shape[0] != 1
    a = _dq(b, b.input(0), b.input(1), b.input(2))
    w = _dq(b, b.input(3), b_scale, b.input(5), axis=(0 if trans_b else 1) if per_column else None)
    inputs = [a, w]
    if b.input(6) is not None:
        bias_scale = b.op("Mul", [b.input(1), b_scale], shape=b_scale.shape)
        inputs.append(_dq(b, b.input(6), bias_scale, None, axis=0 if per_column else None))
    attrs = {"alpha": float(b.attr("alpha", 1.0)), "transA": int(b.attr("transA", 0)), "transB": trans_b}
    y = b.op("Gemm", inputs, attrs, dtype=FLOAT, shape=node.outputs[0].shape)
    if b.input(7) is None:
        return [y]
    return [_q(b, y, b.input(7), b.input(8), b.input(0))]


def _integer_matmul(b: Builder, a_q: ir.Value, a_zp: ir.Value | None, a_scale: ir.Value, w: ir.Value,
                    w_scale: ir.Value, w_zp: ir.Value | None, bias: ir.Value | None, shape) -> ir.Value:
    """Cast(MatMulInteger(a_q, w, a_zp, w_zp)) * (a_scale * w_scale) (+ bias): what the dynamic quantizer writes."""
    inputs = [a_q, w, a_zp, w_zp]
    while inputs[-1] is None:
        inputs.pop()
    acc = b.op("MatMulInteger", inputs, dtype=ir.DataType.INT32, shape=shape)
    scale = b.op("Mul", [a_scale, w_scale], shape=w_scale.shape)
    y = b.op("Mul", [b.op("Cast", [acc], {"to": FLOAT.value}, dtype=FLOAT), scale], dtype=FLOAT, shape=shape)
    return b.op("Add", [y, bias], shape=shape) if bias is not None else y


@expansion("MatMulIntegerToFloat")
def matmul_integer_to_float(node: ir.Node, b: Builder) -> list:
    """(A, B, a_scale, b_scale, a_zp?, b_zp?, bias?) -> the float product of the dequantized A and B."""
    return [_integer_matmul(b, b.input(0), b.input(4), b.input(2), b.input(1), b.input(3), b.input(5), b.input(6),
                            node.outputs[0].shape)]


@expansion("DynamicQuantizeMatMul")
def dynamic_quantize_matmul(node: ir.Node, b: Builder) -> list:
    """(A float, B, b_scale, b_zp?, bias?): A quantized to uint8 on the GPU (DynamicQuantizeLinear), then as
    MatMulIntegerToFloat."""
    a_q, a_scale, a_zp = b.op("DynamicQuantizeLinear", [b.input(0)], outputs=3, dtype=ir.DataType.UINT8,
                              shape=b.input(0).shape)
    a_scale.dtype, a_zp.dtype = FLOAT, ir.DataType.UINT8
    a_scale.shape, a_zp.shape = ir.Shape([]), ir.Shape([])
    return [_integer_matmul(b, a_q, a_zp, a_scale, b.input(1), b.input(2), b.input(3), b.input(4),
                            node.outputs[0].shape)]


@expansion("QuantizeLinear", "DequantizeLinear")
def contrib_qdq(node: ir.Node, b: Builder) -> list:
    """onnxruntime's own Q/DQ (its quantizer's ``UseQDQContribOps``: 16-bit and 4-bit codes before opset 21) are
    ONNX's, whose kernels read every type at any opset."""
    keys = ("axis", "block_size") if node.op_type == "DequantizeLinear" else ("axis", "block_size", "saturate")
    attrs = {k: b.attr(k) for k in keys if b.attr(k) is not None}
    inputs = list(node.inputs)
    zp = inputs[2] if len(inputs) > 2 else None
    dtype = (zp.dtype if zp is not None else ir.DataType.UINT8) if node.op_type == "QuantizeLinear" \
        else inputs[1].dtype
    return [b.op(node.op_type, inputs, attrs, dtype=dtype, shape=inputs[0].shape)]
