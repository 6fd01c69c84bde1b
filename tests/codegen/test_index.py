"""Indexing ops against onnx.reference: Gather, GatherElements, GatherND, ScatterElements, ScatterND (all
reductions, duplicate indices), OneHot, Trilu, EyeLike, ReverseSequence, Compress; negative indices and
axes, int64 data, indices as data (GPU buffers) and as constants."""

import numpy as np
import pytest
from onnx import helper
from oprefs import check_model, check_node, make_model

rng = np.random.default_rng(3)
I64 = np.int64


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def i64(*shape):
    return rng.integers(-100, 100, size=shape).astype(I64)


def idx(hi, *shape, neg=True):
    return rng.integers(-hi if neg else 0, hi, size=shape).astype(I64)


def run(op, inputs: dict, n_outputs=1, **attrs):
    """All inputs are graph inputs, in order (check_node would put initializers after feeds)."""
    outs = [f"y{i}" for i in range(n_outputs)]
    model = make_model([helper.make_node(op, list(inputs), outs, **attrs)], inputs, outs)
    return check_model(model, inputs)


# -- Gather family ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,axis,ishape", [((5, 4), 0, (3,)), ((5, 4), 1, (2, 3)), ((2, 3, 4), -1, ()),
                                               ((2, 3, 4), 1, (4, 1)), ((6,), 0, (2, 2)), ((3, 1, 2), 1, (5,))])
@pytest.mark.parametrize("dtype", ["f", "i"])
def test_gather(shape, axis, ishape, dtype):
    x = f32(*shape) if dtype == "f" else i64(*shape)
    _, _, _, gpu = run("Gather", {"x": x, "i": idx(shape[axis], *ishape)}, axis=axis)
    assert gpu


def test_gather_constant_indices():
    x = f32(4, 5)
    check_node("Gather", {"x": x}, initializers={"i": np.array(-2, I64)}, axis=1)
    check_node("Gather", {"x": x}, initializers={"i": np.array([[3, -1], [0, 0]], I64)})
    check_node("Gather", {"x": x}, initializers={"i": np.array([2], np.int32)}, axis=0)


@pytest.mark.parametrize("shape,ishape,axis", [((3, 4), (3, 4), 0), ((3, 4), (3, 6), 1), ((2, 3, 4), (2, 2, 4), -2),
                                               ((5,), (7,), 0)])
def test_gather_elements(shape, ishape, axis):
    run("GatherElements", {"x": f32(*shape), "i": idx(shape[axis], *ishape)}, axis=axis)
    run("GatherElements", {"x": i64(*shape), "i": idx(shape[axis], *ishape)}, axis=axis)


def _nd_indices(data_shape, ishape, b):
    k = ishape[-1]
    cols = [rng.integers(-data_shape[b + t], data_shape[b + t], size=ishape[:-1]) for t in range(k)]
    return np.stack(cols, axis=-1).astype(I64)


@pytest.mark.parametrize("shape,ishape,b", [((3, 4), (2, 2), 0), ((3, 4, 5), (2, 1), 0), ((3, 4, 5), (4, 2, 3), 0),
                                            ((2, 3, 4), (2, 1), 1), ((2, 3, 4, 5), (2, 3, 2), 1), ((2, 3, 4), (2, 3, 5, 1), 2)])
def test_gather_nd(shape, ishape, b):
    run("GatherND", {"x": f32(*shape), "i": _nd_indices(shape, ishape, b)}, batch_dims=b)


# -- Scatter family ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("shape,ishape,axis", [((4, 5), (2, 5), 0), ((4, 5), (3, 2), 1), ((3, 4, 2), (3, 3, 2), -2)])
def test_scatter_elements(reduction, shape, ishape, axis):
    i = idx(shape[axis], *ishape)
    if reduction == "none":  # unique targets along the axis (duplicates are undefined without a reduction)
        moved = np.moveaxis(i, axis, -1)
        rows = [rng.permutation(shape[axis])[: ishape[axis]] for _ in range(moved[..., 0].size)]
        i = np.moveaxis(np.array(rows).reshape(moved.shape), -1, axis).astype(I64)
        i = np.where(rng.random(i.shape) < 0.5, i - shape[axis], i)
    run("ScatterElements", {"x": f32(*shape), "i": i, "u": f32(*ishape)}, axis=axis, reduction=reduction)


def test_scatter_elements_int64_add():
    run("ScatterElements", {"x": i64(3, 3), "i": idx(3, 2, 3), "u": i64(2, 3)}, reduction="add")


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("shape,ishape", [((4, 5), (3, 1)), ((4, 5, 3), (2, 2)), ((6,), (4, 1)), ((2, 3, 4), (2, 2, 3))])
def test_scatter_nd(reduction, shape, ishape):
    k = ishape[-1]
    flat = int(np.prod(shape[:k]))
    m = int(np.prod(ishape[:-1]))
    pick = rng.permutation(flat)[:m] if reduction == "none" else rng.integers(0, flat, size=m)
    i = np.stack(np.unravel_index(pick, shape[:k]), axis=-1).reshape(ishape).astype(I64)
    u = f32(*(list(ishape[:-1]) + list(shape[k:])))
    feeds = {"x": f32(*shape), "i": i, "u": u}
    if reduction in ("max", "min"):  # onnx.reference's max/min indexes with a non-tuple: use onnxruntime
        return _against_onnxruntime("ScatterND", feeds, reduction=reduction)
    run("ScatterND", feeds, reduction=reduction)


def _against_onnxruntime(op, feeds, **attrs):
    import onnxruntime as ort

    from webinfer.backend import WebinferRep

    model = make_model([helper.make_node(op, list(feeds), ["y"], **attrs)], feeds, ["y"])
    model.graph.output[0].type.tensor_type.elem_type = helper.np_dtype_to_tensor_dtype(feeds["x"].dtype)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = WebinferRep(model).run(feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# -- OneHot, Trilu, EyeLike, ReverseSequence, Compress ------------------------------------------------------------
@pytest.mark.parametrize("ishape,axis", [((4,), -1), ((2, 3), 0), ((2, 3), 1), ((3,), -2)])
def test_one_hot(ishape, axis):
    i = idx(5, *ishape)
    check_node("OneHot", {"i": i}, initializers={"d": np.array(5, I64), "v": np.array([-1.0, 3.0], np.float32)},
               axis=axis)
    check_node("OneHot", {"i": i.astype(np.float32)}, initializers={"d": np.array(6.0, np.float32),
                                                                      "v": np.array([0, 1], I64)}, axis=axis)


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, 0, 2, -1, -5])
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 3), (6, 2)])
def test_trilu(upper, k, shape):
    inits = {"k": np.array(k, I64)} if k is not None else None
    check_node("Trilu", {"x": f32(*shape)}, initializers=inits, upper=upper)


def test_trilu_int64():
    check_node("Trilu", {"x": i64(4, 4)}, upper=0)


def test_eye_like():
    check_node("EyeLike", {"x": f32(3, 4)}, k=1)
    check_node("EyeLike", {"x": i64(4, 3)}, k=-2, dtype=1)


@pytest.mark.parametrize("time_axis,batch_axis,shape", [(0, 1, (5, 3, 2)), (1, 0, (3, 5, 2)), (0, 1, (4, 2))])
def test_reverse_sequence(time_axis, batch_axis, shape):
    lens = rng.integers(1, shape[time_axis] + 1, size=shape[batch_axis]).astype(I64)
    run("ReverseSequence", {"x": f32(*shape), "l": lens}, time_axis=time_axis, batch_axis=batch_axis)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_compress_constant_condition(axis):
    attrs = {"axis": axis} if axis is not None else {}
    cond = np.array([True, False, True, True], bool)
    check_node("Compress", {"x": f32(4, 4)}, initializers={"c": cond}, **attrs)


@pytest.mark.parametrize("mode", ["linear", "circular"])
@pytest.mark.parametrize("axis,shape,upd_len", [(-2, (2, 3, 6, 4), 3), (1, (3, 5, 2), 5), (2, (2, 2, 7), 2)])
def test_tensor_scatter(mode, axis, shape, upd_len):
    past = rng.standard_normal(shape).astype(np.float32)
    a = axis % len(shape)
    upd = rng.standard_normal(shape[:a] + (upd_len,) + shape[a + 1:]).astype(np.float32)
    high = shape[a] if mode == "circular" else shape[a] - upd_len + 1
    idx = rng.integers(0, high, shape[0]).astype(np.int64)
    _, _, _, gpu = check_node("TensorScatter", {"past": past, "upd": upd, "idx": idx}, opset=24, mode=mode, axis=axis)
    assert gpu
    check_node("TensorScatter", {"past": past, "upd": upd}, opset=24, mode=mode, axis=axis)  # no indices: row 0
