"""DeformConv against onnx.reference: offsets that leave the image, groups, offset groups, mask, bias, strides,
dilations and pads."""

import numpy as np
import pytest
from oprefs import check_node

rng = np.random.default_rng(0)


@pytest.mark.parametrize("group,offset_group,attrs,with_mask,with_bias", [
    (1, 1, {}, False, False), (2, 2, {"strides": [2, 1], "pads": [1, 0, 1, 1]}, True, True),
    (1, 2, {"dilations": [2, 1]}, True, False)])
def test_deform_conv(group, offset_group, attrs, with_mask, with_bias):
    n, c, h, w, oc, k = 2, 4, 6, 5, 4, 3
    st, dil = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1])
    pads = attrs.get("pads", [0, 0, 0, 0])
    oh = (h + pads[0] + pads[2] - dil[0] * (k - 1) - 1) // st[0] + 1
    ow = (w + pads[1] + pads[3] - dil[1] * (k - 1) - 1) // st[1] + 1
    feeds = {"x": rng.standard_normal((n, c, h, w)).astype(np.float32),
             "w": rng.standard_normal((oc, c // group, k, k)).astype(np.float32),
             "off": (rng.standard_normal((n, offset_group * 2 * k * k, oh, ow)) * 1.5).astype(np.float32)}
    if with_bias or with_mask:
        feeds["b"] = rng.standard_normal(oc).astype(np.float32) if with_bias else np.zeros(oc, np.float32)
    if with_mask:
        feeds["m"] = rng.random((n, offset_group * k * k, oh, ow)).astype(np.float32)
    _, _, _, gpu = check_node("DeformConv", feeds, opset=22, kernel_shape=[k, k], group=group,
                              offset_group=offset_group, **attrs)
    assert gpu
