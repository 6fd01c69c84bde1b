"""Resize / Upsample against onnx.reference: every mode, coordinate transformation, scales or sizes, axes."""

import numpy as np
import pytest
from oprefs import check_node

rng = np.random.default_rng(0)
X = rng.uniform(-2, 2, size=(2, 3, 5, 6)).astype(np.float32)
EMPTY = np.zeros((0,), np.float32)
CTMS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric"]


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("scales", [(1, 1, 2.0, 1.5), (1, 1, 0.6, 0.5)])
def test_resize_scales(mode, ctm, scales):
    _, _, _, gpu = check_node("Resize", {"x": X}, initializers={"roi": EMPTY, "s": np.array(scales, np.float32)},
                              opset=19, mode=mode, coordinate_transformation_mode=ctm)
    assert gpu


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
def test_resize_nearest_modes_sizes(nearest_mode):
    sizes = np.array([2, 3, 9, 4], np.int64)
    check_node("Resize", {"x": X}, initializers={"roi": EMPTY, "s": EMPTY, "sizes": sizes}, opset=19,
               mode="nearest", nearest_mode=nearest_mode)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_antialias_exclude_outside(mode):
    s = np.array([1, 1, 0.4, 0.7], np.float32)
    check_node("Resize", {"x": X}, initializers={"roi": EMPTY, "s": s}, opset=19, mode=mode, antialias=1)
    check_node("Resize", {"x": X}, initializers={"roi": EMPTY, "s": s}, opset=19, mode="cubic",
               exclude_outside=1, cubic_coeff_a=-0.5)


def test_resize_tf_crop_and_resize_axes_and_policy():
    roi = np.array([0.4, 0.6, 1.2, 0.9], np.float32)
    check_node("Resize", {"x": X}, initializers={"roi": roi, "s": EMPTY, "sizes": np.array([4, 7], np.int64)},
               opset=19, mode="linear", coordinate_transformation_mode="tf_crop_and_resize", axes=[3, 2],
               extrapolation_value=7.5)
    check_node("Resize", {"x": X}, initializers={"roi": EMPTY, "s": EMPTY, "sizes": np.array([8, 8], np.int64)},
               opset=19, mode="nearest", axes=[2, 3], keep_aspect_ratio_policy="not_larger")


def test_resize_uint8_and_old_opsets():
    xu = rng.integers(0, 256, size=(1, 2, 3, 4)).astype(np.uint8)
    check_node("Resize", {"x": xu}, initializers={"roi": EMPTY, "s": np.array([1, 1, 2, 2], np.float32)},
               opset=13, mode="nearest")
    # (Resize-10 is not checked: onnx.reference reads its 2nd input as roi and cannot run it.)
    check_node("Upsample", {"x": X}, initializers={"s": np.array([1, 1, 2, 2], np.float32)}, opset=9)


def test_resize_symbolic_batch_is_not_resized():
    # A non-resized axis needs no fixed size; batch 1 and a size-1 resized axis are edge shapes.
    x = rng.uniform(-1, 1, size=(1, 1, 1, 3)).astype(np.float32)
    check_node("Resize", {"x": x}, initializers={"roi": EMPTY, "s": np.array([1, 1, 3, 2], np.float32)},
               opset=19, mode="cubic")
