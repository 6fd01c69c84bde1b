"""Data movement against onnx.reference: views (no copy), Shape/Constant, Transpose, Slice, Expand, Concat,
Split, Tile, Pad, DepthToSpace, SpaceToDepth, CenterCropPad, ConstantOfShape, Range, on random shapes,
size-1 dims, scalars, negative axes, float32 and int64."""

import numpy as np
import pytest
from onnx import TensorProto, helper
from oprefs import check_model, check_node, make_model

rng = np.random.default_rng(2)
I64 = np.int64


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def i64(*shape):
    return rng.integers(-100, 100, size=shape).astype(I64)


def arr(*v):
    return np.array(v, I64)


# -- views: they must not copy --------------------------------------------------------------------------
@pytest.mark.parametrize("target,allowzero", [([0, -1], 0), ([-1], 0), ([4, 3, 2], 0), ([2, 0, 4], 0),
                                              ([1, 24, 1], 0), ([2, 12], 1)])
def test_reshape(target, allowzero):
    x = f32(2, 3, 4)
    _, _, placement, gpu = check_node("Reshape", {"x": x}, initializers={"s": arr(*target)}, allowzero=allowzero)
    assert not gpu and placement[0]["where"] == "view"


def test_reshape_int64_and_zero_size():
    check_node("Reshape", {"x": i64(3, 4)}, initializers={"s": arr(2, -1, 3)})
    check_node("Reshape", {"x": np.zeros((0, 4), np.float32)}, initializers={"s": arr(0, 2, 2)}, allowzero=1)


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
def test_flatten(axis):
    _, _, placement, gpu = check_node("Flatten", {"x": f32(2, 3, 1, 4)}, axis=axis)
    assert not gpu


@pytest.mark.parametrize("axes", [None, [1], [-1, 1]])
def test_squeeze(axes):
    inits = {"a": arr(*axes)} if axes is not None else None
    _, _, _, gpu = check_node("Squeeze", {"x": f32(2, 1, 3, 1)}, initializers=inits)
    assert not gpu


@pytest.mark.parametrize("axes", [[0], [-1], [0, 3], [3, 0, 1]])
def test_unsqueeze(axes):
    _, _, _, gpu = check_node("Unsqueeze", {"x": f32(2, 3)}, initializers={"a": arr(*axes)})
    assert not gpu
    check_node("Unsqueeze", {"x": np.float32(2.5)}, initializers={"a": arr(0)})


def test_unsqueeze_squeeze_axes_attribute_opset11():
    x = f32(3, 4)
    check_node("Unsqueeze", {"x": x}, axes=[0, -1], opset=11)
    check_node("Squeeze", {"x": x.reshape(3, 1, 4)}, axes=[1], opset=11)


def test_identity_is_a_view():
    _, _, placement, gpu = check_node("Identity", {"x": i64(4, 2)})
    assert not gpu and placement[0]["where"] == "view"


# -- shape arithmetic on the host ------------------------------------------------------------------------
@pytest.mark.parametrize("start,end", [(None, None), (1, None), (-1, None), (0, -1), (1, 2), (-10, 10)])
def test_shape(start, end):
    attrs = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    _, _, placement, _ = check_node("Shape", {"x": f32(2, 3, 4)}, **attrs)
    assert placement[0]["where"] in ("host", "folded")


def test_size():
    check_node("Size", {"x": f32(2, 3, 4)})
    check_node("Size", {"x": np.float32(1.0)})


@pytest.mark.parametrize("attr,value", [("value", helper.make_tensor("v", TensorProto.FLOAT, [2, 2], [1, 2, 3, 4])),
                                        ("value_float", 2.5), ("value_floats", [1.0, -2.0]), ("value_int", 7),
                                        ("value_ints", [3, -4, 5])])
def test_constant(attr, value):
    node = helper.make_node("Constant", [], ["c"], **{attr: value})
    add = helper.make_node("Identity", ["c"], ["y"])
    check_model(make_model([node, add], {}, ["y"]), {})


def test_shape_gather_concat_reshape_chain():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape is evaluated on the host; only data is a kernel."""
    x = f32(2, 6, 4)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
        helper.make_node("Gather", ["s", "i1"], ["t"], axis=0),
        helper.make_node("Unsqueeze", ["b", "ax"], ["bu"]),
        helper.make_node("Unsqueeze", ["t", "ax"], ["tu"]),
        helper.make_node("Concat", ["bu", "tu", "tail"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("Transpose", ["r"], ["y"], perm=[0, 2, 1, 3]),
    ]
    inits = {"i0": np.array(0, I64), "i1": np.array(1, I64), "ax": arr(0), "tail": arr(2, -1)}
    _, _, placement, gpu = check_model(make_model(nodes, {"x": x}, ["y"], inits), {"x": x})
    assert [p["op"] for p in gpu] == ["Transpose"]


# -- Transpose --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,perm", [((2, 3), None), ((2, 3, 4), [1, 0, 2]), ((2, 3, 4), [2, 0, 1]),
                                        ((2, 1, 3, 4), [0, 3, 1, 2]), ((1, 5, 1), [2, 1, 0]), ((3, 2, 2, 2, 2), [4, 2, 0, 3, 1])])
def test_transpose(shape, perm):
    attrs = {"perm": perm} if perm is not None else {}
    check_node("Transpose", {"x": f32(*shape)}, **attrs)
    check_node("Transpose", {"x": i64(*shape)}, **attrs)


# -- Slice ------------------------------------------------------------------------------------------------
BIG = 2**63 - 1
SLICES = [
    ([0], [2], None, None),
    ([1, 0], [BIG, -1], [0, 2], None),
    ([-1], [-BIG], [1], [-1]),
    ([4, 0], [0, 10], [2, 0], [-2, 3]),
    ([0, 1, 1], [BIG, 3, 5], [-3, -2, -1], [1, 1, 2]),
    ([10], [20], [2], None),
    ([-100], [100], [-1], [3]),
]


@pytest.mark.parametrize("starts,ends,axes,steps", SLICES)
@pytest.mark.parametrize("dtype", ["f", "i"])
def test_slice(starts, ends, axes, steps, dtype):
    x = f32(3, 4, 6) if dtype == "f" else i64(3, 4, 6)
    inits = {"s": arr(*starts), "e": arr(*ends)}
    if axes is not None:
        inits["a"] = arr(*axes)
    if steps is not None:
        inits["t"] = arr(*steps)
    check_node("Slice", {"x": x}, initializers=inits)


def test_slice_full_range_is_a_view():
    _, _, _, gpu = check_node("Slice", {"x": f32(3, 4)}, initializers={"s": arr(0), "e": arr(BIG)})
    assert not gpu


# -- Expand, Tile, Concat, Split ---------------------------------------------------------------------------
@pytest.mark.parametrize("shape,target", [((3, 1), (3, 4)), ((1,), (2, 3)), ((), (2, 2)), ((2, 1, 3), (4, 2, 5, 3)),
                                          ((3, 4), (1, 1)), ((1, 4), (3, 1))])
def test_expand(shape, target):
    check_node("Expand", {"x": f32(*shape)}, initializers={"s": arr(*target)})
    check_node("Expand", {"x": i64(*shape)}, initializers={"s": arr(*target)})


@pytest.mark.parametrize("shape,reps", [((2, 3), (2, 2)), ((1, 3), (3, 1)), ((2, 1, 3), (1, 4, 2)), ((5,), (1,))])
def test_tile(shape, reps):
    check_node("Tile", {"x": f32(*shape)}, initializers={"r": arr(*reps)})
    check_node("Tile", {"x": i64(*shape)}, initializers={"r": arr(*reps)})


@pytest.mark.parametrize("shapes,axis", [([(2, 3), (2, 5)], 1), ([(2, 3), (4, 3), (1, 3)], 0), ([(2, 3, 1)] * 3, -1),
                                         ([(3,), (0,), (2,)], 0), ([(1, 2, 2), (1, 3, 2)], -2)])
def test_concat(shapes, axis):
    feeds = {f"x{k}": f32(*s) for k, s in enumerate(shapes)}
    check_node("Concat", feeds, axis=axis)
    check_node("Concat", {k: i64(*v.shape) for k, v in feeds.items()}, axis=axis)


def test_concat_many_inputs_and_constants():
    feeds = {f"x{k}": f32(2, k + 1) for k in range(9)}
    check_node("Concat", feeds, initializers={"w": f32(2, 2)}, axis=1)


@pytest.mark.parametrize("split,axis", [([2, 4], 1), ([1, 1, 4], -1), ([3, 0, 3], 1)])
def test_split_input(split, axis):
    check_node("Split", {"x": f32(2, 6)}, n_outputs=len(split), initializers={"s": arr(*split)}, axis=axis)


def test_split_equal_and_num_outputs():
    check_node("Split", {"x": f32(6, 2)}, n_outputs=3, axis=0, opset=13)
    check_node("Split", {"x": i64(2, 7)}, n_outputs=3, axis=1, num_outputs=3, opset=18)
    check_node("Split", {"x": f32(4, 3)}, n_outputs=2, split=[1, 3], opset=11)


# -- Pad and layout ops --------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads", [[0, 1, 2, 0, 2, 1], [1, 0, 0, 0, 0, 3], [2, 0, 3, 1, 1, 3]])
def test_pad(mode, pads):
    x = f32(2, 3, 4)
    inits = {"p": arr(*pads)}
    if mode == "constant":
        inits["v"] = np.float32(1.5)
    check_node("Pad", {"x": x}, initializers=inits, mode=mode)


def test_pad_axes_int_and_data_value():
    check_node("Pad", {"x": i64(3, 4)}, initializers={"p": arr(1, 2), "v": np.array(7, I64), "a": arr(-1)})
    feeds = {"x": f32(3, 4), "v": np.array(-3.0, np.float32)}
    node = helper.make_node("Pad", ["x", "p", "v"], ["y"])
    _, _, _, gpu = check_model(make_model([node], feeds, ["y"], {"p": arr(1, 0, 0, 2)}), feeds)
    assert gpu
    check_node("Pad", {"x": f32(3, 4)}, pads=[1, 1, 1, 1], value=2.0, opset=10)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(mode):
    check_node("DepthToSpace", {"x": f32(2, 8, 3, 2)}, blocksize=2, mode=mode)


def test_space_to_depth():
    check_node("SpaceToDepth", {"x": f32(2, 3, 4, 6)}, blocksize=2)


@pytest.mark.parametrize("shape,target,axes", [((5, 6, 3), (3, 8), [0, 1]), ((4, 7), (6, 3), None), ((2, 5, 4), (3, 2), [-1, 1])])
def test_center_crop_pad(shape, target, axes):
    attrs = {"axes": axes} if axes is not None else {}
    check_node("CenterCropPad", {"x": f32(*shape)}, initializers={"s": arr(*target)}, **attrs)


# -- generated tensors ------------------------------------------------------------------------------------------
def test_constant_of_shape_and_range_static():
    value = helper.make_tensor("v", TensorProto.INT64, [1], [3])
    check_node("ConstantOfShape", {"s": arr(2, 3)}, value=value)
    check_node("ConstantOfShape", {"s": arr(4)})
    check_node("Range", {"a": np.array(1, I64), "b": np.array(20, I64), "c": np.array(3, I64)})
    check_node("Range", {"a": np.float32(1.0), "b": np.float32(-2.0), "c": np.float32(-0.5)})


# -- symbolic dims: one build, several sequence lengths ----------------------------------------------------------
def _symbolic_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 16])
    c = helper.make_tensor
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
        helper.make_node("Gather", ["s", "i1"], ["t"], axis=0),
        helper.make_node("Unsqueeze", ["b", "ax"], ["bu"]),
        helper.make_node("Unsqueeze", ["t", "ax"], ["tu"]),
        helper.make_node("Concat", ["bu", "tu", "tail"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("Transpose", ["r"], ["heads"], perm=[0, 2, 1, 3]),
        helper.make_node("Slice", ["x", "one", "tu", "ax1"], ["shifted"]),
        helper.make_node("Range", ["zero", "t", "one_s"], ["pos"]),
        helper.make_node("Concat", ["bu", "tu"], ["bt"], axis=0),
        helper.make_node("ConstantOfShape", ["bt"], ["mask"], value=c("v", TensorProto.INT64, [1], [5])),
        helper.make_node("Concat", ["bu", "tu", "sixteen"], ["full"], axis=0),
        helper.make_node("Expand", ["bias", "full"], ["bias_full"]),
        helper.make_node("Concat", ["x", "shifted"], ["cat"], axis=1),
        helper.make_node("Slice", ["x", "neg2", "big", "ax1", "neg1"], ["rev"]),
        helper.make_node("Gather", ["x", "pos"], ["gathered"], axis=1),
    ]
    inits = {"i0": np.array(0, I64), "i1": np.array(1, I64), "ax": arr(0), "tail": arr(4, -1), "one": arr(1),
             "ax1": arr(1), "zero": np.array(0, I64), "one_s": np.array(1, I64), "sixteen": arr(16),
             "bias": f32(1, 1, 16), "neg2": arr(-2), "big": arr(-2**63), "neg1": arr(-1)}
    outs = ["heads", "shifted", "pos", "mask", "bias_full", "cat", "rev", "gathered"]
    graph = helper.make_graph(nodes, "sym", [x], [helper.make_empty_tensor_value_info(o) for o in outs],
                              [helper.make_tensor(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape, v.reshape(-1))
                               for n, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_symbolic_dims_one_build_two_lengths(tmp_path):
    import onnxruntime as ort

    from webinfer import InferenceSession
    from webinfer.build import build

    model = _symbolic_model()
    manifest = build(model, str(tmp_path))
    assert set(manifest["dims"]) >= {"batch", "seq"}
    session = InferenceSession(str(tmp_path))
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in model.graph.output]
    for batch, seq in [(2, 3), (1, 7)]:
        x = f32(batch, seq, 16)
        got = session.run(names, {"x": x})
        want = ref.run(names, {"x": x})
        for name, g, w in zip(names, got, want):
            assert g.shape == w.shape, name
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=name)


def _symbolic_mask_model():
    """Causal-mask and layout patterns of exported decoders, all sized by symbolic dims."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 16])
    neg = helper.make_tensor("v", TensorProto.FLOAT, [1], [-1e9])
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i1"], ["t"], axis=0),
        helper.make_node("Gather", ["s", "im1"], ["last"], axis=0),
        helper.make_node("Unsqueeze", ["t", "ax"], ["tu"]),
        helper.make_node("Concat", ["tu", "tu"], ["tt"], axis=0),
        helper.make_node("ConstantOfShape", ["tt"], ["full"], value=neg),
        helper.make_node("Trilu", ["full", "one"], ["causal"], upper=1),
        helper.make_node("EyeLike", ["full"], ["eye"]),
        helper.make_node("Slice", ["s", "one1", "big"], ["tail"]),
        helper.make_node("Concat", ["minus1", "tail"], ["flat_shape"], axis=0),
        helper.make_node("Reshape", ["x", "flat_shape"], ["flat"]),
        helper.make_node("Tile", ["x", "reps"], ["tiled"]),
        helper.make_node("Split", ["tiled"], ["h0", "h1"], axis=1, num_outputs=2),
        helper.make_node("Pad", ["x", "pads"], ["padded"], mode="edge"),
        helper.make_node("Unsqueeze", ["last", "ax"], ["lastu"]),
        helper.make_node("Expand", ["x", "lastu"], ["same"]),
        helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),
        helper.make_node("Expand", ["s", "rows"], ["many_shapes"]),  # 90 elements: too many for the host
    ]
    inits = {"i1": np.array(1, I64), "im1": np.array(-1, I64), "ax": arr(0), "one": np.array(1, I64),
             "one1": arr(1), "big": arr(2**63 - 1), "minus1": arr(-1), "reps": arr(1, 2, 1),
             "pads": arr(0, 1, 0, 0, 2, 0), "rows": arr(30, 1)}
    outs = ["causal", "eye", "flat", "h0", "h1", "padded", "same", "xt", "many_shapes"]
    graph = helper.make_graph(nodes, "mask", [x], [helper.make_empty_tensor_value_info(o) for o in outs],
                              [helper.make_tensor(n, TensorProto.INT64, v.shape, v.reshape(-1)) for n, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("make", [_symbolic_model, _symbolic_mask_model])
def test_symbolic_patterns_one_build(tmp_path, make):
    import onnxruntime as ort

    from webinfer import InferenceSession
    from webinfer.build import build

    model = make()
    build(model, str(tmp_path))
    session = InferenceSession(str(tmp_path))
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in model.graph.output]
    for batch, seq in [(2, 5), (1, 2)]:
        x = f32(batch, seq, 16)
        for name, g, w in zip(names, session.run(names, {"x": x}), ref.run(names, {"x": x})):
            assert g.shape == w.shape, name
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("shape,starts,ends,axes,view", [
    ((6, 4), [0], [3], [0], True),            # leading rows: the first 12 elements
    ((1, 5, 3), [0], [2], [1], True),         # length-1 axis before the cut
    ((2, 5, 3), [0], [2], [1], False),        # rows of two batches: not contiguous
    ((6, 4), [0], [2], [1], False),           # leading columns: strided
    ((6, 4), [1], [3], [0], False),           # does not start at 0
])
def test_prefix_slice_is_a_view(tmp_path, shape, starts, ends, axes, view):
    """A Slice that is the first elements of its input in memory aliases it (planner: views, no copy)."""
    import json

    from onnx.reference import ReferenceEvaluator

    import webinfer

    x = np.random.default_rng(0).normal(size=shape).astype(np.float32)
    inits = [helper.make_tensor(n, TensorProto.INT64, [len(v)], v) for n, v in
             (("s", starts), ("e", ends), ("a", axes))]
    nodes = [helper.make_node("Slice", ["x", "s", "e", "a"], ["y"]), helper.make_node("Relu", ["y"], ["z"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    out = tmp_path / "m.wi"
    webinfer.build(model, str(out), optimize=False)
    for program in json.loads((out / "manifest.json").read_text())["programs"]:
        assert (program["placement"][0]["where"] == "view") == view
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = webinfer.InferenceSession(str(out)).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-6)
