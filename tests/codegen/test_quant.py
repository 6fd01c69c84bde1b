"""(De)quantization against onnx.reference: per-tensor, per-axis, blocked, saturation, half-to-even."""

import numpy as np
import pytest
from oprefs import check_node

rng = np.random.default_rng(0)


@pytest.mark.parametrize("zp_dtype", [np.uint8, np.int8, np.uint16, np.int16])
def test_quantize_per_tensor(zp_dtype):
    x = rng.uniform(-300, 300, size=(3, 7)).astype(np.float32)
    x[0, :4] = [0.5, 1.5, 2.5, -2.5]  # ties round to even
    zp = np.array(3, zp_dtype)
    _, _, _, gpu = check_node("QuantizeLinear", {"x": x, "s": np.float32(1.0), "zp": zp}, opset=21)
    assert gpu
    check_node("QuantizeLinear", {"x": x, "s": np.float32(2.0)}, initializers={"zp": zp}, opset=21)


def test_quantize_default_uint8_and_output_dtype():
    x = rng.uniform(-10, 300, size=(5,)).astype(np.float32)
    check_node("QuantizeLinear", {"x": x, "s": np.float32(0.7)}, opset=21)
    check_node("QuantizeLinear", {"x": x, "s": np.float32(0.7)}, opset=21, output_dtype=3)


def test_quantize_per_axis_and_blocked():
    x = rng.uniform(-50, 50, size=(2, 3, 4)).astype(np.float32)
    s = rng.uniform(0.2, 1, size=(3,)).astype(np.float32)
    zp = rng.integers(-5, 5, size=(3,)).astype(np.int8)
    check_node("QuantizeLinear", {"x": x, "s": s, "zp": zp}, opset=21, axis=1)
    sb = rng.uniform(0.2, 1, size=(2, 3, 2)).astype(np.float32)
    zb = rng.integers(0, 20, size=(2, 3, 2)).astype(np.uint8)
    check_node("QuantizeLinear", {"x": x, "s": sb, "zp": zb}, opset=21, axis=2, block_size=2)


def test_dequantize():
    x = rng.integers(0, 256, size=(2, 3, 4)).astype(np.uint8)
    check_node("DequantizeLinear", {"x": x, "s": np.float32(0.25), "zp": np.uint8(128)}, opset=21)
    s = rng.uniform(0.1, 1, size=(4,)).astype(np.float32)
    zp = rng.integers(0, 255, size=(4,)).astype(np.uint8)
    check_node("DequantizeLinear", {"x": x, "s": s, "zp": zp}, opset=21, axis=-1)
    xi = rng.integers(-128, 128, size=(4, 6)).astype(np.int8)
    sb = rng.uniform(0.1, 1, size=(2, 6)).astype(np.float32)
    check_node("DequantizeLinear", {"x": xi, "s": sb}, opset=21, axis=0, block_size=2)


@pytest.mark.parametrize("lo,hi,shape", [(-3, 5, (3, 4)), (1, 5, (7,)), (-5, -1, (300,)), (0, 0, (2, 2))])
def test_dynamic_quantize(lo, hi, shape):
    x = rng.uniform(lo, hi, size=shape).astype(np.float32)
    check_node("DynamicQuantizeLinear", {"x": x}, n_outputs=3, opset=11)
