"""Small float networks that onnxruntime's quantizers turn into quantized models as people have them: a conv net
(Conv/Relu/MaxPool, a MatMul head) and a transformer-ish block (Q/K/V projections, attention, an MLP), and
helpers to quantize them with ``quantize_static`` (QDQ) and ``quantize_dynamic`` (MatMulInteger/ConvInteger)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper
from onnx import numpy_helper as nh

CONV_INPUT = (1, 3, 16, 16)
BLOCK_INPUT = (1, 12, 64)


def conv_net(opset: int, seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)

    def w(name, shape, s):
        return nh.from_array((rng.standard_normal(shape) * s).astype(np.float32), name)

    inits = [w("w1", (8, 3, 3, 3), 0.3), w("b1", (8,), 0.1), w("w2", (16, 8, 3, 3), 0.2), w("b2", (16,), 0.1),
             w("fc", (64, 10), 0.1), w("fcb", (10,), 0.1), nh.from_array(np.array([1, -1], np.int64), "shp")]
    n = helper.make_node
    nodes = [n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), n("Relu", ["c1"], ["r1"]),
             n("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             n("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]), n("Relu", ["c2"], ["r2"]),
             n("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
             n("Reshape", ["p2", "shp"], ["f"]), n("MatMul", ["f", "fc"], ["m"]), n("Add", ["m", "fcb"], ["y"])]
    return _model(nodes, inits, CONV_INPUT, [1, 10], opset)


def block_net(opset: int, seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    d = BLOCK_INPUT[-1]
    inits = []

    def w(name, shape, s=0.1):
        inits.append(nh.from_array((rng.standard_normal(shape) * s).astype(np.float32), name))
        return name

    n = helper.make_node
    nodes = [n("MatMul", ["x", w("wq", (d, d))], ["q"]), n("MatMul", ["x", w("wk", (d, d))], ["k"]),
             n("MatMul", ["x", w("wv", (d, d))], ["v"]), n("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
             n("MatMul", ["q", "kt"], ["s"]), n("Mul", ["s", w("scale", (), 1.0)], ["s2"]),
             n("Softmax", ["s2"], ["p"], axis=-1), n("MatMul", ["p", "v"], ["a"]),
             n("MatMul", ["a", w("wo", (d, d))], ["o"]), n("Add", ["o", "x"], ["h"]),
             n("MatMul", ["h", w("w1", (d, 4 * d))], ["f1"]), n("Add", ["f1", w("b1", (4 * d,))], ["f1b"]),
             n("Relu", ["f1b"], ["f1r"]), n("MatMul", ["f1r", w("w2", (4 * d, d))], ["f2"]),
             n("Add", ["f2", "h"], ["y"])]
    return _model(nodes, inits, BLOCK_INPUT, list(BLOCK_INPUT), opset)


def _model(nodes, inits, in_shape, out_shape, opset):
    g = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", T.FLOAT, list(in_shape))],
                          [helper.make_tensor_value_info("y", T.FLOAT, out_shape)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def inputs(shape, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def quantize_static(model: onnx.ModelProto, in_shape, tmp, *, activation: str, weight: str, per_channel: bool,
                    **extra) -> onnx.ModelProto:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType
    from onnxruntime.quantization import quantize_static as quantize

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter([{"x": inputs(in_shape, 100 + i)} for i in range(4)])

        def get_next(self):
            return next(self.feeds, None)

    src, dst = tmp / "float.onnx", tmp / "qdq.onnx"
    onnx.save(model, src)
    quantize(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ, activation_type=QuantType[activation],
             weight_type=QuantType[weight], per_channel=per_channel, extra_options=extra)
    return onnx.load(dst)


def quantize_dynamic(model: onnx.ModelProto, tmp, weight: str, **kw) -> onnx.ModelProto:
    from onnxruntime.quantization import QuantType
    from onnxruntime.quantization import quantize_dynamic as quantize

    src, dst = tmp / "float.onnx", tmp / "dynamic.onnx"
    onnx.save(model, src)
    quantize(str(src), str(dst), weight_type=QuantType[weight], **kw)
    return onnx.load(dst)


def output_step(model: onnx.ModelProto) -> float:
    """The scale of the DequantizeLinear that yields the graph's output (one code of it), else 0."""
    consts = {i.name: nh.to_array(i) for i in model.graph.initializer}
    out = model.graph.output[0].name
    for node in model.graph.node:
        if out in node.output and node.op_type == "DequantizeLinear" and node.input[1] in consts:
            return float(np.max(consts[node.input[1]]))
    return 0.0
