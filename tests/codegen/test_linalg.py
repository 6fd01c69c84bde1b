"""Det against onnx.reference (numpy's LU in float64): random, singular, pivoting-needed and batched matrices."""

import numpy as np
import pytest
from oprefs import check_node

rng = np.random.default_rng(0)


@pytest.mark.parametrize("shape", [(2, 2), (3, 3), (4, 5, 5), (2, 3, 1, 1), (9, 9)])
def test_det(shape):
    _, _, _, gpu = check_node("Det", {"x": rng.standard_normal(shape).astype(np.float32)}, opset=22, rtol=1e-4,
                              atol=1e-4)
    assert gpu


def test_det_singular_and_zero_pivot():
    x = np.array([[[1, 2], [2, 4]], [[0, 1], [1, 0]], [[0, 0], [0, 3]]], np.float32)  # singular, swap, zero column
    check_node("Det", {"x": x}, opset=22)
