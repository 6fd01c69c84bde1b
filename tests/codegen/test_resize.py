"""Resize / Upsample against onnx.reference: every mode, coordinate transformation, scales or sizes, axes."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from oprefs import check_node, check_shapes

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


# -- symbolic height and width: one build, coordinates from uniforms, several sizes -------------------------
SIZES = [(5, 7), (8, 3), (12, 12)]


def _symbolic(nodes, inits, opset=19):
    g = helper.make_graph(nodes, "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, "H", "W"])],
                          [helper.make_empty_tensor_value_info("y")],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _feeds(hw):
    return {"x": rng.uniform(-2, 2, size=(2, 3) + hw).astype(np.float32)}


@pytest.mark.parametrize("mode,ctm", [("nearest", "half_pixel"), ("nearest", "asymmetric"), ("linear", "half_pixel"),
                                      ("linear", "align_corners"), ("cubic", "pytorch_half_pixel"),
                                      ("linear", "half_pixel_symmetric"), ("cubic", "asymmetric")])
def test_resize_symbolic_scales(mode, ctm):
    s = np.array([1, 1, 2.0, 0.6], np.float32)
    node = helper.make_node("Resize", ["x", "roi", "s"], ["y"], mode=mode, coordinate_transformation_mode=ctm)
    check_shapes(_symbolic([node], {"roi": EMPTY, "s": s}), _feeds, SIZES)


@pytest.mark.parametrize("mode,antialias,policy", [("nearest", 0, "stretch"), ("linear", 1, "stretch"),
                                                   ("cubic", 1, "not_larger"), ("nearest", 0, "not_smaller")])
def test_resize_symbolic_sizes_from_shape(mode, antialias, policy):
    # sizes computed from the input's shape (as exporters write F.interpolate(size=...)): [2H - 1, W // 2 + 3]
    nodes = [helper.make_node("Shape", ["x"], ["sh"], start=2),
             helper.make_node("Mul", ["sh", "m"], ["a"]), helper.make_node("Div", ["a", "d"], ["b"]),
             helper.make_node("Add", ["b", "c"], ["sizes"]),
             helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode, antialias=antialias, axes=[2, 3],
                              keep_aspect_ratio_policy=policy)]
    inits = {"m": np.array([2, 1], np.int64), "d": np.array([1, 2], np.int64), "c": np.array([-1, 3], np.int64)}
    check_shapes(_symbolic(nodes, inits), _feeds, SIZES)


def test_resize_symbolic_tf_crop_and_resize_and_exclude_outside():
    roi = np.array([0.1, 0.3, 0.9, 0.8], np.float32)
    nodes = [helper.make_node("Resize", ["x", "roi", "s"], ["y"], mode="linear", axes=[2, 3], extrapolation_value=-3.0,
                              coordinate_transformation_mode="tf_crop_and_resize")]
    check_shapes(_symbolic(nodes, {"roi": roi, "s": np.array([1.5, 0.75], np.float32)}), _feeds, SIZES)
    nodes = [helper.make_node("Resize", ["x", "", "s"], ["y"], mode="cubic", exclude_outside=1, cubic_coeff_a=-0.5)]
    check_shapes(_symbolic(nodes, {"s": np.array([1, 1, 0.5, 1.7], np.float32)}), _feeds, SIZES)
