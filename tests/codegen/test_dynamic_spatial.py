"""Symbolic height and width through the spatial ops: each model is built once and run at several sizes
(odd, non-square), against ReferenceEvaluator (onnxruntime where the reference is wrong)."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from oprefs import check_shapes

from webinfer.backend import WebinferRep
from webinfer.errors import WebinferError

rng = np.random.default_rng(0)
SIZES = [(5, 7), (8, 8), (13, 6)]
N = helper.make_node


def model(nodes, inits=None, opset=19):
    g = helper.make_graph(nodes, "spatial", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])],
                          [helper.make_empty_tensor_value_info("y")],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def feeds(hw):
    return {"x": rng.standard_normal((1, 3) + hw).astype(np.float32)}


def w(*shape):
    return rng.standard_normal(shape).astype(np.float32)


CASES = {
    "conv_dilated_strided": ([N("Conv", ["x", "w"], ["y"], dilations=[2, 1], pads=[2, 1, 2, 1], strides=[1, 2])],
                             {"w": w(4, 3, 3, 3)}),
    "conv_depthwise": ([N("Conv", ["x", "w", "b"], ["y"], group=3, pads=[1, 1, 1, 1], strides=[2, 2])],
                       {"w": w(6, 1, 3, 3), "b": w(6)}),
    "conv_transpose": ([N("ConvTranspose", ["x", "w"], ["y"], strides=[2, 3], output_padding=[1, 0],
                          pads=[1, 0, 0, 1])], {"w": w(3, 2, 3, 3)}),
    "conv_transpose_same": ([N("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], auto_pad="SAME_UPPER")],
                            {"w": w(3, 2, 3, 3)}),
    "maxpool_ceil": ([N("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1],
                        ceil_mode=1)], {}),
    "avgpool_include_pad": ([N("AveragePool", ["x"], ["y"], kernel_shape=[3, 2], strides=[2, 1],
                               pads=[1, 0, 1, 1], count_include_pad=1)], {}),
    "global_avgpool": ([N("GlobalAveragePool", ["x"], ["y"])], {}),
    # pad to a multiple of 8 with pads from shape arithmetic: (8 - hw % 8) % 8
    "pad_to_multiple": ([N("Shape", ["x"], ["s"], start=2), N("Mod", ["s", "e8"], ["m"]), N("Sub", ["e8", "m"], ["p"]),
                         N("Mod", ["p", "e8"], ["p2"]), N("Concat", ["z6", "p2"], ["pads"], axis=0),
                         N("Pad", ["x", "pads"], ["y"], mode="edge")],
                        {"e8": np.array([8]), "z6": np.zeros(6, np.int64)}),
    "slice_negative_step": ([N("Slice", ["x", "st", "en", "ax", "sp"], ["y"])],
                            {"st": np.array([-1, 1]), "en": np.array([-2**63, -1]), "ax": np.array([2, 3]),
                             "sp": np.array([-2, 1])}),
    "slice_concat_h": ([N("Slice", ["x", "st", "en", "ax"], ["a"]), N("Concat", ["a", "x"], ["y"], axis=2)],
                       {"st": np.array([1]), "en": np.array([4]), "ax": np.array([2])}),
    "center_crop_pad": ([N("CenterCropPad", ["x", "t"], ["y"], axes=[2, 3])], {"t": np.array([6, 7])}),
    "space_to_depth_upsample": ([N("Slice", ["x", "z", "e", "ax"], ["e2"]), N("SpaceToDepth", ["e2"], ["d"], blocksize=2),
                                 N("DepthToSpace", ["d"], ["y"], blocksize=2)],
                                {"z": np.array([0, 0]), "e": np.array([4, 6]), "ax": np.array([2, 3])}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_one_build_many_sizes(case):
    nodes, inits = CASES[case]
    rep = check_shapes(model(nodes, inits), feeds, SIZES)
    assert any(p["where"] == "gpu" for p in rep.placement)


def test_conv_same_upper_strided_matches_onnxruntime():
    # (ReferenceEvaluator places SAME_UPPER's padding wrongly for even sizes with strides; onnxruntime is right)
    m = model([N("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2])], {"w": w(4, 3, 3, 3)})
    rep, ref = WebinferRep(m), ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for hw in SIZES:
        f = feeds(hw)
        np.testing.assert_allclose(rep.run(f)[0], ref.run(None, f)[0], rtol=1e-4, atol=1e-5)
    assert len(rep._sessions) == 1


def test_shapes_that_break_an_assumption_are_refused():
    # A slice start of 4 on a symbolic axis is taken as inside it; a smaller input gets a clear error, never a
    # read beyond the tensor. Same for a window larger than the input.
    m = model([N("Slice", ["x", "st", "en", "ax"], ["y"])], {"st": np.array([4]), "en": np.array([2**62]),
                                                           "ax": np.array([3])})
    rep = WebinferRep(m)
    assert rep.run(feeds((3, 6)))[0].shape == (1, 3, 3, 2)
    with pytest.raises(WebinferError, match=r"W=3 .*Slice .*slice index 4 must lie in \[0, W\]"):
        rep.run(feeds((3, 3)))
    rep = WebinferRep(model([N("MaxPool", ["x"], ["y"], kernel_shape=[3, 3])]))
    with pytest.raises(WebinferError, match=r"H=2 .*MaxPool .*output size H - 2 must be at least 1"):
        rep.run(feeds((2, 2)))
