"""Quantized models as onnxruntime's quantizers write them, built as they are and run against onnxruntime (its
graph optimizations off, so it runs the same Q/DQ arithmetic rather than its own fused integer kernels).

A quantized network is discontinuous: where a float sits on a rounding tie of the next QuantizeLinear, one
code flips and moves what follows by one step. So outputs must agree within one step of the output's
quantization (or 1e-3 of its scale for 16-bit codes, whose step is below float noise), on at most a few
elements; the integer kernels themselves (MatMulInteger, ConvInteger) are compared exactly."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import quantnets as qn
from contrib.ort_ref import ort_run
from onnx import helper

from webinfer.backend import WebinferRep

NETS = {"conv": (qn.conv_net, qn.CONV_INPUT), "block": (qn.block_net, qn.BLOCK_INPUT)}


def _agree(model, feeds, target="software", off_fraction=0.05):
    want = ort_run(model, feeds)[0]
    got = WebinferRep(model, target=target).run(feeds)[0]
    assert got.shape == want.shape
    step = qn.output_step(model)
    err = np.abs(got - want)
    assert err.max() <= max(1.01 * step, 1e-3 * np.abs(want).max()), f"{err.max()} (one step: {step})"
    assert (err > 1e-3 * np.abs(want).max()).mean() <= off_fraction


STATIC = [(opset, "QUInt8", "QUInt8", False) for opset in (10, 13, 17, 19, 21, 23)] + \
         [(opset, "QInt8", "QInt8", True) for opset in (13, 17, 19, 21, 23)] + \
         [(21, "QInt16", "QInt8", True), (21, "QUInt16", "QUInt8", False), (21, "QUInt8", "QInt4", True),
          (23, "QInt8", "QUInt4", False)]


@pytest.mark.parametrize("net", NETS)
@pytest.mark.parametrize("opset,activation,weight,per_channel", STATIC)
def test_quantize_static(net, opset, activation, weight, per_channel, tmp_path):
    make, shape = NETS[net]
    model = qn.quantize_static(make(opset), shape, tmp_path, activation=activation, weight=weight,
                               per_channel=per_channel)
    assert {o.version for o in model.opset_import if o.domain in ("", "ai.onnx")} == {opset}
    assert any(n.op_type == "DequantizeLinear" for n in model.graph.node)
    _agree(model, {"x": qn.inputs(shape, 7)})


def _int_outputs(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with the outputs of its first integer kernels (those that read the graph input's codes) as
    graph outputs too: these must equal onnxruntime's exactly."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    quantized = {o for n in m.graph.node if n.op_type == "DynamicQuantizeLinear" and n.input[0] == "x"
                 for o in n.output}
    for n in m.graph.node:
        if n.op_type in ("MatMulInteger", "ConvInteger") and n.input[0] in quantized:
            m.graph.output.append(helper.make_tensor_value_info(n.output[0], onnx.TensorProto.INT32, None))
    assert len(m.graph.output) > 1
    return m


@pytest.mark.parametrize("target", ["software", "gpu"])
@pytest.mark.parametrize("weight", ["QInt8", "QUInt8"])
@pytest.mark.parametrize("net", NETS)
def test_quantize_dynamic(net, weight, target, tmp_path):
    make, shape = NETS[net]
    model = _int_outputs(qn.quantize_dynamic(make(17), tmp_path, weight, op_types_to_quantize=["MatMul", "Conv"]))
    ops = {n.op_type for n in model.graph.node}
    assert "DynamicQuantizeLinear" in ops and ("ConvInteger" in ops if net == "conv" else "MatMulInteger" in ops)
    feeds = {"x": qn.inputs(shape, 7)}
    want = ort_run(model, feeds)
    got = WebinferRep(model, target=target).run(feeds)
    for w, g in zip(want[1:], got[1:]):
        np.testing.assert_array_equal(g, w)
    err = np.abs(got[0] - want[0]).max() / np.abs(want[0]).max()
    assert err <= 1e-2, err  # a flipped activation code after the first layer moves the output ~0.4 %


@pytest.mark.parametrize("activation,weight", [("QInt16", "QInt8"), ("QUInt16", "QUInt8"), ("QUInt8", "QInt4")])
def test_quantize_static_contrib_qdq(activation, weight, tmp_path):
    """onnxruntime's own com.microsoft Q/DQ (UseQDQContribOps: how it writes 16-bit and 4-bit codes at opset 17)."""
    make, shape = NETS["block"]
    model = qn.quantize_static(make(17), shape, tmp_path, activation=activation, weight=weight, per_channel=True,
                               UseQDQContribOps=True)
    assert any(n.domain == "com.microsoft" and n.op_type == "DequantizeLinear" for n in model.graph.node)
    _agree(model, {"x": qn.inputs(shape, 7)})
