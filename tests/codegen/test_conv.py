"""Conv, BatchNormalization (and the integer convs) against onnx.reference."""

import numpy as np
import pytest
from onnx import helper
from oprefs import ATOL, RTOL, TARGETS, check_model, check_node, make_model, tolerance

from webinfer.backend import WebinferRep

rng = np.random.default_rng(2)


def f32(shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


CONV2D = [
    # x shape, w shape, attributes
    ((1, 3, 7, 9), (4, 3, 3, 3), {}),
    ((2, 3, 8, 8), (5, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 4, 9, 7), (6, 2, 3, 2), {"group": 2, "pads": [1, 0, 2, 1]}),
    ((2, 6, 10, 11), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}),  # depthwise
    ((1, 3, 11, 10), (4, 3, 3, 3), {"dilations": [2, 3], "pads": [2, 2, 1, 1]}),
    ((1, 2, 9, 8), (3, 2, 4, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 3]}),
    ((1, 2, 9, 8), (3, 2, 4, 3), {"auto_pad": "SAME_LOWER", "strides": [2, 1]}),
    ((3, 8, 5, 5), (16, 8, 1, 1), {}),
    ((2, 8, 4, 6), (12, 8, 1, 1), {}),  # pointwise as a matmul with vec4 loads
    ((1, 4, 7, 9), (32, 2, 3, 3), {"group": 2, "pads": [1, 2, 0, 1]}),  # vec4 weights, 16 channels/invocation
    ((2, 3, 5, 6), (24, 3, 2, 3), {"strides": [2, 1], "dilations": [1, 2]}),  # vec4 weights, 8 channels
    ((1, 1, 1, 1), (1, 1, 1, 1), {}),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("xs,ws,attrs", CONV2D)
def test_conv2d(xs, ws, attrs, bias, target):
    inits = {"w": f32(ws)}
    if bias:
        inits["b"] = f32((ws[0],))
    _, _, _, gpu = check_node("Conv", {"x": f32(xs)}, initializers=inits, target=target, **attrs)
    assert gpu


def no_small_convs(monkeypatch) -> None:
    """The software class with no small convolutions: the tests' convs, all small, take the blocks (and the
    depthwise windows written into the shader) that real layers take."""
    from dataclasses import replace

    import webinfer.options as O

    monkeypatch.setitem(O.KERNEL_CLASSES, "software", replace(O.KERNEL_CLASSES["software"], small_conv_macs=0))


@pytest.fixture
def big_conv_blocks(monkeypatch):
    no_small_convs(monkeypatch)


@pytest.mark.parametrize("xs,ws,attrs", CONV2D)
def test_conv2d_big_blocks(xs, ws, attrs, big_conv_blocks):
    check_node("Conv", {"x": f32(xs)}, initializers={"w": f32(ws), "b": f32((ws[0],))}, target="software", **attrs)


# Groups of >= 16 output channels: the gpu class's implicit GEMM (tiled, im2col loads), every window feature
GEMM_CONVS = [
    ((2, 8, 9, 7), (20, 8, 3, 3), {"pads": [1, 0, 2, 1], "strides": [2, 1]}),
    ((1, 8, 7, 9), (32, 4, 3, 3), {"group": 2, "dilations": [2, 1], "pads": [2, 1, 1, 1]}),
    ((1, 3, 30, 33), (16, 3, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((2, 5, 40), (18, 5, 5), {"pads": [2, 1], "strides": [3]}),
    ((1, 4, 5, 6, 7), (16, 4, 3, 2, 3), {"pads": [1, 0, 1, 1, 1, 0], "strides": [1, 2, 2]}),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("xs,ws,attrs", GEMM_CONVS)
def test_conv_implicit_gemm(xs, ws, attrs, target):
    inits = {"w": f32(ws), "b": f32((ws[0],))}  # onnxruntime: onnx.reference's strided SAME_UPPER is off
    check_ort("Conv", {"x": f32(xs)}, inits, target=target, rtol=1e-4, atol=1e-4, **attrs)
    t = {"w": f32((ws[1] * attrs.get("group", 1), ws[0] // attrs.get("group", 1)) + ws[2:]), "b": f32((ws[0],))}
    tattrs = {k: v for k, v in attrs.items() if k != "auto_pad"}
    check_ort("ConvTranspose", {"x": f32(xs[:1] + (t["w"].shape[0],) + xs[2:])}, t, target=target, rtol=1e-4,
              atol=1e-4, **tattrs)
    xi, wi = q(xs, np.uint8), q(ws, np.uint8)
    check_ort("ConvInteger", {"x": xi}, {"w": wi, "xz": q((), np.uint8), "wz": q((), np.uint8)}, target=target,
              **attrs)


# 2-D depthwise convs: the software class's row kernel (dwconv.wgsl.j2) for column strides 1 and 2 without
# column dilation, the direct kernel otherwise; rows not a multiple of its 8 outputs, windows wider than the row
DEPTHWISE = [
    ((1, 4, 9, 13), (4, 1, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 3, 14, 15), (3, 1, 5, 5), {"pads": [2, 2, 2, 2], "strides": [2, 2]}),
    ((1, 2, 7, 19), (2, 1, 3, 5), {"pads": [2, 0, 1, 3], "strides": [1, 2]}),
    ((1, 3, 12, 17), (3, 1, 3, 3), {"pads": [2, 1, 2, 1], "strides": [2, 1], "dilations": [2, 1]}),
    ((1, 2, 3, 4), (2, 1, 3, 7), {"pads": [1, 3, 1, 3]}),
    ((1, 5, 6, 33), (5, 1, 1, 1), {}),
    ((1, 2, 8, 9), (2, 1, 3, 3), {"pads": [1, 1, 1, 1], "strides": [1, 3]}),  # stride 3: the direct kernel
    ((1, 2, 8, 9), (2, 1, 3, 3), {"pads": [1, 2, 1, 2], "dilations": [1, 2]}),  # column dilation: direct
    # channels numbered across workgroups: 14 invocations a channel (37 x 14 = 518, not a multiple of 64)
    ((1, 37, 14, 14), (37, 1, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 40, 7, 9), (40, 1, 5, 5), {"pads": [2, 2, 2, 2], "strides": [2, 2]}),
]


@pytest.mark.parametrize("target", ["software", "gpu"])
@pytest.mark.parametrize("xs,ws,attrs", DEPTHWISE)
def test_conv_depthwise(xs, ws, attrs, target):
    attrs = dict(attrs, group=xs[1])
    check_node("Conv", {"x": f32(xs)}, initializers={"w": f32(ws), "b": f32((ws[0],))}, target=target, **attrs)
    check_node("Conv", {"x": f32(xs), "w": f32(ws)}, target=target, **attrs)  # the weight in ONNX's layout


@pytest.mark.parametrize("xs,ws,attrs", DEPTHWISE)
def test_conv_depthwise_big(xs, ws, attrs, big_conv_blocks):
    """The row kernel with the window's shape written into the shader (convs over small_conv_macs)."""
    attrs = dict(attrs, group=xs[1])
    check_node("Conv", {"x": f32(xs)}, initializers={"w": f32(ws), "b": f32((ws[0],))}, target="software", **attrs)


@pytest.mark.parametrize("small", [True, False])
def test_depthwise_row_kernel_is_used(tmp_path, monkeypatch, small):
    """The software class takes the row kernel for a stride-1 and a stride-2 depthwise conv: a shader per
    stride (small convs: the window's size in uniforms) or per window shape (big ones), shared by layers of
    other sizes (the third conv reuses the first's)."""
    if not small:
        no_small_convs(monkeypatch)
    import glob

    from webinfer.build import build

    nodes = [helper.make_node("Conv", ["x", "w1"], ["h"], group=4, pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["h", "w2"], ["h2"], group=4, pads=[2, 2, 2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["h2", "w1"], ["y"], group=4, pads=[1, 1, 1, 1])]
    x = f32((1, 4, 10, 12))
    inits = {"w1": f32((4, 1, 3, 3)), "w2": f32((4, 1, 5, 5))}
    model = make_model(nodes, {"x": x}, ["y"], inits)
    build(model, str(tmp_path), target="software")
    shaders = [open(f).read() for f in glob.glob(str(tmp_path / "shaders" / "*.wgsl"))]
    assert len(shaders) == 2 and all("fn ld_in(row: u32" in s for s in shaders)
    check_model(model, {"x": x}, target="software")


def test_conv_weight_as_input():
    check_node("Conv", {"x": f32((2, 4, 6, 5)), "w": f32((6, 2, 3, 3)), "b": f32((6,))}, group=2, pads=[1, 1, 1, 1])


@pytest.mark.parametrize("xs,ws,attrs", [
    ((2, 3, 17), (4, 3, 5), {"pads": [2, 1], "strides": [2]}),
    ((1, 4, 9), (4, 1, 3), {"group": 4, "dilations": [2]}),
    ((1, 2, 5, 6, 7), (3, 2, 3, 2, 3), {"pads": [1, 0, 1, 1, 1, 0], "strides": [1, 2, 2]}),
    ((1, 2, 4, 5, 3), (8, 2, 3, 2, 2), {"pads": [1, 1, 0, 1, 0, 1]}),
    ((2, 8, 9), (4, 8, 1), {}),
    ((1, 4, 4, 5, 3), (4, 2, 2, 2, 2), {"group": 2, "auto_pad": "SAME_UPPER"}),
])
def test_conv_1d_3d(xs, ws, attrs):
    check_node("Conv", {"x": f32(xs)}, initializers={"w": f32(ws), "b": f32((ws[0],))}, **attrs)


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (1, 4), (2, 3, 2, 2, 3)])
def test_batchnorm_constant_weights(shape):
    c = shape[1]
    inits = {"s": f32((c,)), "b": f32((c,)), "m": f32((c,)), "v": f32((c,), 0.5, 2.0)}
    _, _, _, gpu = check_node("BatchNormalization", {"x": f32(shape)}, initializers=inits, epsilon=1e-3)
    assert gpu


def test_batchnorm_runtime_weights():
    c = 3
    feeds = {"x": f32((2, c, 4, 5)), "s": f32((c,)), "b": f32((c,)), "m": f32((c,)), "v": f32((c,), 0.5, 2.0)}
    check_node("BatchNormalization", feeds)


def check_ort(op: str, feeds: dict, initializers: dict, target: str = "software", rtol: float = RTOL,
              atol: float = ATOL, **attrs):
    """Against onnxruntime, where onnx.reference is wrong (its Conv treats auto_pad=VALID as SAME)."""
    import onnxruntime as ort

    model = make_model([helper.make_node(op, list(feeds) + list(initializers), ["y"], **attrs)], feeds, ["y"],
                       initializers)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (ref,) = sess.run(None, feeds)
    (got,) = WebinferRep(model, target=target).run(feeds)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, *tolerance(target, rtol, atol))


@pytest.mark.parametrize("xs,ws,strides", [((1, 2, 9, 8), (3, 2, 4, 3), [2, 2]), ((2, 3, 7), (2, 3, 2), [3])])
def test_conv_valid(xs, ws, strides):
    check_ort("Conv", {"x": f32(xs)}, {"w": f32(ws)}, auto_pad="VALID", strides=strides)


CONVT = [
    ((1, 3, 4, 5), (3, 2, 3, 3), {}),
    ((2, 2, 5, 4), (2, 3, 3, 2), {"strides": [2, 3], "pads": [1, 0, 1, 1]}),
    ((1, 2, 3, 3), (2, 2, 3, 3), {"strides": [3, 2], "output_padding": [1, 1]}),
    ((1, 4, 4, 3), (4, 1, 2, 3), {"group": 2, "strides": [2, 2], "dilations": [2, 1]}),
    ((1, 4, 5, 5), (4, 1, 3, 3), {"group": 4, "strides": [2, 2], "pads": [1, 1, 1, 1]}),  # depthwise
    ((1, 2, 4, 4), (2, 3, 3, 3), {"strides": [2, 2], "output_shape": [9, 10]}),
    ((1, 2, 4, 5), (2, 3, 3, 2), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((2, 3, 7), (3, 4, 4), {"strides": [3], "pads": [1, 2]}),
    ((1, 2, 3, 4, 2), (2, 2, 2, 3, 2), {"strides": [2, 1, 2]}),
    ((1, 3, 4, 5), (3, 8, 3, 3), {"strides": [2, 2], "pads": [1, 0, 0, 1]}),  # vec4 weights
]


@pytest.mark.parametrize("weights_as_input", [False, True])
@pytest.mark.parametrize("xs,ws,attrs", CONVT)
def test_conv_transpose(xs, ws, attrs, weights_as_input):
    cout = ws[1] * attrs.get("group", 1)
    w, b = f32(ws), f32((cout,))
    if attrs.get("group", 1) > 1:  # onnx.reference's ConvTranspose slices grouped weights wrongly
        feeds, inits = ({"x": f32(xs), "w": w, "b": b}, {}) if weights_as_input else ({"x": f32(xs)}, {"w": w, "b": b})
        check_ort("ConvTranspose", feeds, inits, **attrs)
    elif weights_as_input:
        check_node("ConvTranspose", {"x": f32(xs), "w": w, "b": b}, **attrs)
    else:
        check_node("ConvTranspose", {"x": f32(xs)}, initializers={"w": w, "b": b}, **attrs)


def q(shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, size=shape).astype(dtype)


@pytest.mark.parametrize("const_w", [False, True])
@pytest.mark.parametrize("dt", [np.uint8, np.int8])
def test_conv_integer(dt, const_w):
    x, w = q((1, 4, 6, 7), dt), q((6, 2, 3, 3), dt)
    zps = {"xz": q((), dt), "wz": q((), dt)}
    attrs = {"group": 2, "pads": [1, 1, 0, 1], "strides": [1, 2]}
    if const_w:
        check_node("ConvInteger", {"x": x}, initializers={"w": w, **zps}, **attrs)
        check_node("ConvInteger", {"x": x}, initializers={"w": w}, **attrs)
    else:
        check_node("ConvInteger", {"x": x, "w": w, **zps}, **attrs)


@pytest.mark.parametrize("dt", [np.uint8, np.int8])
@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_conv(dt, per_channel):
    cout = 4
    feeds = {"x": q((2, 3, 6, 5), dt), "xs": np.float32(0.05), "xz": q((), dt), "w": q((cout, 3, 3, 3), dt),
             "ws": np.float32(0.02), "wz": np.zeros((), dt), "ys": np.float32(2.5), "yz": q((), dt),
             "b": rng.integers(-500, 500, size=(cout,)).astype(np.int32)}
    if per_channel:
        feeds["ws"] = rng.uniform(0.01, 0.03, size=(cout,)).astype(np.float32)
    check_node("QLinearConv", feeds, pads=[1, 1, 1, 1])
    inits = {k: feeds.pop(k) for k in list(feeds) if k != "x"}
    check_node("QLinearConv", feeds, initializers=inits, strides=[2, 1])


def test_conv_integer_per_channel_zero_point():
    x, w = q((1, 2, 5, 5), np.uint8), q((3, 2, 2, 2), np.uint8)
    check_node("ConvInteger", {"x": x, "w": w, "xz": q((), np.uint8), "wz": q((3,), np.uint8)})


def test_conv_pool_symbolic_dims(tmp_path):
    """Conv -> MaxPool -> GlobalAveragePool built once with symbolic N, H, W; run at two sizes."""
    import onnx

    from webinfer import InferenceSession
    from webinfer.build import build

    w, b = f32((8, 3, 3, 3)), f32((8,))
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["p"], ["y"])]
    g = helper.make_graph(nodes, "sym", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 3, "H", "W"])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("p", onnx.TensorProto.FLOAT, None)],
                          [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(b, "b")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    build(model, str(tmp_path))
    sess = InferenceSession(str(tmp_path))
    from onnx.reference import ReferenceEvaluator

    for shape in [(1, 3, 16, 12), (2, 3, 23, 9)]:
        x = f32(shape)
        got = sess.run(["y", "p"], {"x": x})
        ref = ReferenceEvaluator(model).run(["y", "p"], {"x": x})
        for gv, rv in zip(got, ref):
            assert gv.shape == rv.shape
            np.testing.assert_allclose(gv, rv, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("shape,outputs", [((3, 4, 5, 6), 3), ((2, 3, 7), 3), ((4, 2, 3, 3), 1)])
def test_batchnorm_training_mode(shape, outputs):
    c = shape[1]
    inits = {"s": f32((c,)), "b": f32((c,)), "m": f32((c,)), "v": f32((c,), 0.5, 2.0)}
    check_node("BatchNormalization", {"x": f32(shape, -3, 3)}, n_outputs=outputs, initializers=inits, opset=15,
               training_mode=1, momentum=0.8, epsilon=1e-4)


@pytest.mark.parametrize("attrs", [{"strides": [0, 1]}, {"strides": [1, -2]}, {"dilations": [0, 1]}])
def test_conv_window_below_one_is_refused(attrs, tmp_path):
    """A stride or dilation under 1 (ONNX requires >= 1) is refused with a one-line error at build, not
    divided by or written into a shader."""
    from webinfer.build import build
    from webinfer.errors import UnsupportedOpError

    x = f32((1, 4, 8, 8))
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"], group=4, **attrs)], {"x": x}, ["y"],
                       {"w": f32((4, 1, 3, 3))})
    with pytest.raises(UnsupportedOpError, match="each must be at least 1"):
        build(model, str(tmp_path), target="software")
