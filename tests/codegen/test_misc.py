"""Dropout at inference (and training with ratio 0) against onnx.reference."""

import numpy as np
from oprefs import check_node

rng = np.random.default_rng(0)


def test_dropout_inference_identity_and_mask():
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    check_node("Dropout", {"x": x}, opset=22)
    check_node("Dropout", {"x": x}, n_outputs=2, opset=22)
    check_node("Dropout", {"x": x, "r": np.float32(0.4)}, n_outputs=2, opset=22)
    check_node("Dropout", {"x": x}, opset=11, ratio=0.3)


def test_dropout_training_zero_ratio():
    x = rng.standard_normal((2, 7)).astype(np.float32)
    _, _, _, gpu = check_node("Dropout", {"x": x, "r": np.float32(0.0), "t": np.array(True)}, n_outputs=2,
                              opset=22)
    assert gpu
    check_node("Dropout", {"x": x, "r": np.float32(0.5), "t": np.array(False)}, n_outputs=2, opset=22)
