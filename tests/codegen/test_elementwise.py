"""Elementwise ops against onnx.reference on random shapes, broadcasting and edge shapes."""

import numpy as np
import pytest
from oprefs import check_node

rng = np.random.default_rng(0)
SHAPES = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((1,), (5, 1, 3)), ((), (2, 3)), ((2, 1, 3), (1, 4, 1)), ((1, 1), (1, 1))]


def f32(shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("shapes", SHAPES)
def test_binary_float(op, shapes):
    b = f32(shapes[1]) if op != "Div" else f32(shapes[1], 0.5, 2.0)
    _, _, _, gpu = check_node(op, {"a": f32(shapes[0]), "b": b})
    assert gpu, "expected a GPU kernel"


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
def test_binary_int64(op):
    a = rng.integers(-50, 50, size=(3, 5)).astype(np.int64)
    b = rng.integers(1, 7, size=(5,)).astype(np.int64)
    check_node(op, {"a": a, "b": b})


def test_pow():
    check_node("Pow", {"a": f32((3, 4), 0.1, 3.0), "b": f32((4,))})
    check_node("Pow", {"a": f32((3, 4)), "b": np.array([2.0, 3.0, 0.0, -1.0], np.float32)})


@pytest.mark.parametrize("op,lo,hi", [("Neg", -3, 3), ("Abs", -3, 3), ("Sqrt", 0.01, 4), ("Reciprocal", 0.5, 3),
                                      ("Exp", -5, 5), ("Log", 0.01, 5), ("Erf", -3, 3), ("Tanh", -30, 30),
                                      ("Sigmoid", -30, 30), ("Relu", -3, 3), ("HardSwish", -5, 5)])
@pytest.mark.parametrize("shape", [(2, 3, 4), (), (1,), (7, 1)])
def test_unary(op, lo, hi, shape):
    check_node(op, {"x": f32(shape, lo, hi)})


def test_activations_with_attributes():
    x = f32((4, 5), -4, 4)
    check_node("LeakyRelu", {"x": x}, alpha=0.3)
    check_node("HardSigmoid", {"x": x}, alpha=0.3, beta=0.4)
    check_node("Gelu", {"x": x}, opset=20)
    check_node("Gelu", {"x": x}, opset=20, approximate="tanh")


def test_clip():
    x = f32((3, 4), -4, 4)
    check_node("Clip", {"x": x}, initializers={"lo": np.float32(-1), "hi": np.float32(1.5)})
    check_node("Clip", {"x": x, "lo": np.float32(-0.5)})


def test_where_and_comparisons():
    a, b = f32((3, 4)), f32((4,))
    for op in ["Equal", "Less", "Greater"]:
        check_node(op, {"a": a, "b": b})
    check_node("Equal", {"a": np.array([1, 2, 3], np.int64), "b": np.array([1, 5, 3], np.int64)})
    cond = rng.random((3, 4)) > 0.5
    check_node("Where", {"c": cond, "a": a, "b": b})
    check_node("Not", {"c": cond})


@pytest.mark.parametrize("src,dst", [(np.float32, 7), (np.int64, 1), (np.bool_, 1), (np.float32, 9),
                                     (np.int32, 7), (np.float32, 6), (np.int64, 9)])
def test_cast(src, dst):
    x = (rng.uniform(-5, 5, size=(3, 4)) * 3).astype(src)
    check_node("Cast", {"x": x}, to=dst)
