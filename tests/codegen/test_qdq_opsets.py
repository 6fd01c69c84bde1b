"""QuantizeLinear / DequantizeLinear at every opset that changed them (10, 13, 19, 21, 23, and 17 between),
against onnxruntime: per tensor everywhere, per axis from 13, blocked from 21; 8-bit types everywhere, 16-bit
and 4-bit from 21. Each runs as a GPU kernel (the quantized tensor a graph input) and folded at build (a
constant weight: the folder must find a reference implementation for the op at the model's opset)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from contrib.ort_ref import ort_run
from onnx import helper
from oprefs import TARGETS

from webinfer.backend import WebinferRep

OPSETS = (10, 13, 17, 19, 21, 23)
RNG = np.random.default_rng(3)
RANGE = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767),
         "uint4": (0, 15), "int4": (-8, 7), "int32": (-100000, 100000)}
ONNX_TYPE = {"uint4": onnx.TensorProto.UINT4, "int4": onnx.TensorProto.INT4}


def _types(opset: int) -> list[str]:
    return ["uint8", "int8"] + (["uint16", "int16", "uint4", "int4"] if opset >= 21 else [])


def _layouts(opset: int) -> list[str]:
    return ["tensor"] + (["axis"] if opset >= 13 else []) + (["blocked"] if opset >= 21 else [])


CASES = [(o, t, lay) for o in OPSETS for t in _types(o) for lay in _layouts(o)]


def _tensor(name: str, a: np.ndarray, dtype: str) -> onnx.TensorProto:
    if dtype in ONNX_TYPE:
        return helper.make_tensor(name, ONNX_TYPE[dtype], a.shape, a.reshape(-1).astype(np.int32).tolist())
    return onnx.numpy_helper.from_array(a.astype(dtype), name)


def _codes(dtype: str, shape) -> np.ndarray:
    lo, hi = RANGE[dtype]
    return RNG.integers(lo, hi + 1, shape)


def _params(layout: str, dtype: str, shape=(4, 6)):
    """(scale, zero point codes, attributes) of a layout over a [4, 6] tensor (axis 1, blocks of 2 along 0)."""
    if layout == "tensor":
        return np.float32(0.037), _codes(dtype, ()) // 3, {}
    if layout == "axis":
        return (RNG.random(shape[1]) * 0.1 + 0.01).astype(np.float32), _codes(dtype, (shape[1],)) // 3, {"axis": 1}
    blocks = (shape[0] // 2, shape[1])
    return (RNG.random(blocks) * 0.1 + 0.01).astype(np.float32), _codes(dtype, blocks) // 3, \
        {"axis": 0, "block_size": 2}


def _model(nodes, graph_inputs, inits, opset):
    g = helper.make_graph(nodes, "qdq", graph_inputs, [helper.make_empty_tensor_value_info("y")], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _compare(model, feeds, target="software"):
    want = ort_run(model, feeds)[0]
    got = WebinferRep(model, target=target).run(feeds)[0]
    assert got.shape == want.shape
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)
    else:
        np.testing.assert_array_equal(got.astype(np.int64), want.astype(np.int64))


def _dq_model(opset, dtype, layout, constant: bool):
    x = _codes(dtype, (4, 6))
    scale, zp, attrs = _params(layout, dtype)
    inits = [onnx.numpy_helper.from_array(scale, "s"), _tensor("zp", zp, dtype)]
    if constant:
        inits.append(_tensor("x", x, dtype))
        ins, feeds = [], {}
        nodes = [helper.make_node("DequantizeLinear", ["x", "s", "zp"], ["d"], **attrs),
                 helper.make_node("Add", ["d", "a"], ["y"])]
        ins = [helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, [4, 6])]
        feeds = {"a": RNG.standard_normal((4, 6)).astype(np.float32)}
    else:
        onnx_type = ONNX_TYPE.get(dtype, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))
        ins = [helper.make_tensor_value_info("x", onnx_type, [4, 6])]
        feeds = {"x": x.astype(dtype if dtype not in ONNX_TYPE else _ml(dtype))}
        nodes = [helper.make_node("DequantizeLinear", ["x", "s", "zp"], ["y"], **attrs)]
    return _model(nodes, ins, inits, opset), feeds


def _ml(dtype: str):
    import ml_dtypes

    return getattr(ml_dtypes, dtype)


# onnxruntime takes no 4-bit feeds from numpy: 4-bit codes are constants (as weights are)
@pytest.mark.parametrize("opset,dtype,layout,constant", [c + (k,) for c in CASES for k in (False, True)
                                                         if k or c[1] not in ONNX_TYPE])
def test_dequantize(opset, dtype, layout, constant):
    model, feeds = _dq_model(opset, dtype, layout, constant)
    _compare(model, feeds)


@pytest.mark.parametrize("opset,dtype,layout", CASES)
def test_quantize(opset, dtype, layout):
    x = (RNG.standard_normal((4, 6)) * 3).astype(np.float32)
    x[0, :3] = [0.5 * 0.037, 1.5 * 0.037, -2.5 * 0.037]  # ties, per tensor
    scale, zp, attrs = _params(layout, dtype)
    inits = [onnx.numpy_helper.from_array(scale, "s"), _tensor("zp", zp, dtype)]
    ins = [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 6])]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["y"], **attrs)]
    if dtype in ONNX_TYPE:  # onnxruntime returns no 4-bit outputs to numpy: read the codes back through DQ
        nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], **attrs),
                 helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], **attrs)]
    _compare(_model(nodes, ins, inits, opset), {"x": x})


@pytest.mark.parametrize("opset", OPSETS)
def test_int32_bias_dequantize(opset):
    """A bias quantized to int32 (scale = input scale x weight scale, no zero point), as quantizers write it."""
    b = _codes("int32", (6,))
    inits = [onnx.numpy_helper.from_array(b.astype(np.int32), "b"), onnx.numpy_helper.from_array(np.float32(1e-4), "s")]
    ins = [helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, [4, 6])]
    nodes = [helper.make_node("DequantizeLinear", ["b", "s"], ["d"]), helper.make_node("Add", ["a", "d"], ["y"])]
    _compare(_model(nodes, ins, inits, opset), {"a": RNG.standard_normal((4, 6)).astype(np.float32)})


@pytest.mark.parametrize("target", TARGETS)
def test_round_trip_per_class(target):
    """Q then DQ of an activation, per kernel class (the kernel is the same, the fusion around it may not be)."""
    ins = [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 40])]
    inits = [onnx.numpy_helper.from_array(np.float32(0.02), "s"), onnx.numpy_helper.from_array(np.int8(-3), "zp")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["d"]), helper.make_node("Relu", ["d"], ["y"])]
    _compare(_model(nodes, ins, inits, 17), {"x": RNG.standard_normal((3, 40)).astype(np.float32)}, target)
