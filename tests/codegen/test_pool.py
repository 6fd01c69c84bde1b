"""MaxPool, AveragePool, LpPool and the global pools against onnx.reference."""

import numpy as np
import pytest
from onnx import helper
from oprefs import ATOL, RTOL, check_node, make_model

from webinfer.backend import WebinferRep

rng = np.random.default_rng(3)


def f32(shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


POOL2D = [
    ((1, 3, 7, 9), {"kernel_shape": [3, 3]}),
    ((2, 2, 8, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((1, 2, 9, 7), {"kernel_shape": [3, 2], "pads": [1, 0, 2, 1], "strides": [2, 1]}),
    ((1, 1, 10, 11), {"kernel_shape": [3, 3], "dilations": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 9, 8), {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 2, 9, 8), {"kernel_shape": [3, 3], "auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    ((1, 2, 9, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 10, 10), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1, "pads": [1, 1, 1, 1]}),
    ((1, 1, 1, 1), {"kernel_shape": [1, 1]}),
]


@pytest.mark.parametrize("xs,attrs", POOL2D)
def test_maxpool(xs, attrs):
    if attrs.get("auto_pad") == "SAME_LOWER":  # onnx.reference's MaxPool gets this output shape wrong
        check_ort("MaxPool", {"x": f32(xs)}, **attrs)
        return
    _, _, _, gpu = check_node("MaxPool", {"x": f32(xs)}, **attrs)
    assert gpu


@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize("xs,attrs", POOL2D)
def test_averagepool(xs, attrs, include_pad):
    check_node("AveragePool", {"x": f32(xs)}, opset=19, count_include_pad=include_pad, **attrs)


def check_ort(op: str, feeds: dict, n_outputs: int = 1, **attrs):
    """Against onnxruntime, where onnx.reference is wrong (MaxPool indices with pads, SAME_LOWER shapes,
    global pools of rank other than 4, GlobalLpPool missing)."""
    import onnxruntime as ort

    outs = [f"y{i}" for i in range(n_outputs)]
    model = make_model([helper.make_node(op, list(feeds), outs, **attrs)], feeds, outs)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    refs = sess.run(None, feeds)
    got = WebinferRep(model).run(feeds)
    for r, g in zip(refs, got):
        assert g.shape == r.shape and g.dtype == r.dtype
        np.testing.assert_allclose(g, r, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize("xs,attrs", [((1, 2, 8, 6), {"kernel_shape": [2, 2], "strides": [2, 2]}),
                                      ((2, 3, 7, 9), {"kernel_shape": [3, 2], "strides": [2, 1]})])
def test_maxpool_indices(xs, attrs, storage_order):
    check_node("MaxPool", {"x": f32(xs)}, n_outputs=2, storage_order=storage_order, **attrs)


@pytest.mark.parametrize("xs,attrs", [((2, 3, 7, 9), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
                                      ((1, 2, 9, 8), {"kernel_shape": [2, 3], "auto_pad": "SAME_LOWER",
                                                      "strides": [2, 3]}),
                                      ((1, 2, 9, 8), {"kernel_shape": [2, 3], "auto_pad": "SAME_UPPER",
                                                      "strides": [2, 3], "storage_order": 1})])
def test_maxpool_indices_padded(xs, attrs):
    check_ort("MaxPool", {"x": f32(xs)}, n_outputs=2, **attrs)


def test_maxpool_ints():
    x = rng.integers(0, 255, size=(1, 2, 6, 5)).astype(np.uint8)
    check_node("MaxPool", {"x": x}, kernel_shape=[2, 2])


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
@pytest.mark.parametrize("xs,attrs", [
    ((2, 3, 17), {"kernel_shape": [3], "pads": [1, 2], "strides": [2]}),
    ((1, 2, 5, 6, 7), {"kernel_shape": [2, 3, 2], "strides": [1, 2, 2], "pads": [0, 1, 1, 1, 0, 1]}),
])
def test_pool_1d_3d(op, xs, attrs):
    check_node(op, {"x": f32(xs)}, **attrs)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_lppool(p):
    check_node("LpPool", {"x": f32((1, 2, 7, 8))}, kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1], p=p)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("xs", [(2, 3, 5, 7), (1, 1, 1, 1)])
def test_global_pool(op, xs):
    _, _, _, gpu = check_node(op, {"x": f32(xs)})
    assert gpu


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"])
@pytest.mark.parametrize("xs", [(2, 3, 5, 7), (1, 4, 9), (1, 2, 3, 4, 5)])
def test_global_pool_ranks(op, xs):
    check_ort(op, {"x": f32(xs)})
