"""Reductions over rows longer than 65535 elements, against onnx.reference (numpy's pairwise sums).

llvmpipe (lavapipe) breaks out of an invocation's loops once they ran 65535 iterations together, silently: a
ReduceMean over 300 x 300 spatial values with more than two rows (one invocation per row) summed the first
65535 and returned a mean 27 % low, and GlobalAveragePool walked a 512 x 512 window in one invocation, in one
float32 chain (an EfficientNet U-Net's squeeze-excite blocks at 1024 px; onnxruntime's own chain is off by 5e-4
on near-constant data). Such rows now spread over a workgroup: right, and a tree sum besides.
"""

import numpy as np
import pytest
from oprefs import check_node

rng = np.random.default_rng(7)


def spatial(shape, offset=0.0):
    return (rng.standard_normal(shape) + offset).astype(np.float32)


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceMax", "ReduceSumSquare", "ReduceLogSumExp"])
def test_reduce_over_long_rows(op):
    x = spatial((1, 6, 300, 300), 0.5)
    check_node(op, {"x": x}, initializers={"axes": np.array([2, 3], np.int64)}, keepdims=1, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("target", ["software", "gpu"])
@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool_long_windows(op, target):
    check_node(op, {"x": spatial((2, 3, 300, 300), 1.0)}, target=target)
    check_node(op, {"x": spatial((1, 4, 1, 100_000), -0.3)}, target=target)  # one long spatial dim


def test_global_average_pool_sums_accurately():
    """Near-constant positive activations (a white page after SiLU): a float32 running sum drifts by 1e-3 of
    the mean at 512 x 512; the result must be within 1e-5 of the float64 mean."""
    x = (7.3 + rng.random((1, 4, 512, 512)) * 0.01).astype(np.float32)
    _, got, _, _ = check_node("GlobalAveragePool", {"x": x})
    exact = x.astype(np.float64).mean(axis=(2, 3), keepdims=True)
    assert float(np.abs(got[0] - exact).max() / np.abs(exact).max()) < 1e-5


def test_instance_norm_over_long_rows():
    x = spatial((1, 3, 300, 300), 2.0)
    scale, bias = rng.random(3).astype(np.float32) + 0.5, rng.standard_normal(3).astype(np.float32)
    check_node("InstanceNormalization", {"x": x}, initializers={"s": scale, "b": bias}, rtol=1e-4, atol=1e-4)
