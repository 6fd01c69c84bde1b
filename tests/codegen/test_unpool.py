"""MaxUnpool (from MaxPool's own indices, with and without output_shape) and Col2Im against onnx.reference."""

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator
from oprefs import check_node, make_model

rng = np.random.default_rng(0)


@pytest.mark.parametrize("shape,kernel,strides,pads,out_shape", [
    ((1, 2, 4, 4), [2, 2], [2, 2], [0, 0, 0, 0], None), ((2, 1, 5, 5), [3, 3], [2, 2], [1, 1, 1, 1], None),
    ((1, 3, 4, 4), [2, 2], [2, 2], [0, 0, 0, 0], [1, 3, 5, 5]), ((2, 2, 9), [3], [3], [0, 0], None)])
def test_max_unpool(shape, kernel, strides, pads, out_shape):
    x = rng.standard_normal(shape).astype(np.float32)
    pool = make_model([helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=kernel, strides=strides, pads=pads)],
                      {"x": x}, ["y", "i"], opset=22)
    y, i = ReferenceEvaluator(pool).run(None, {"x": x})
    feeds = {"y": y, "i": i}
    if out_shape is not None:
        feeds["s"] = np.array(out_shape, np.int64)
    _, _, _, gpu = check_node("MaxUnpool", feeds, opset=22, kernel_shape=kernel, strides=strides, pads=pads)
    assert gpu


@pytest.mark.parametrize("image,block,attrs", [
    ([5, 5], [1, 5], {}), ([6, 7], [2, 3], {"strides": [2, 1], "dilations": [1, 2], "pads": [1, 0, 1, 2]}),
    ([4, 5, 3], [2, 2, 2], {"pads": [0, 1, 0, 0, 1, 1]})])
def test_col2im(image, block, attrs):
    r = len(image)
    dil, st = attrs.get("dilations", [1] * r), attrs.get("strides", [1] * r)
    pads = attrs.get("pads", [0] * 2 * r)
    blocks = [(image[d] + pads[d] + pads[r + d] - dil[d] * (block[d] - 1) - 1) // st[d] + 1 for d in range(r)]
    x = rng.standard_normal((2, 3 * int(np.prod(block)), int(np.prod(blocks)))).astype(np.float32)
    _, _, _, gpu = check_node("Col2Im", {"x": x}, initializers={"image": np.array(image, np.int64),
                                                                 "block": np.array(block, np.int64)}, **attrs)
    assert gpu
