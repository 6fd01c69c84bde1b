"""Ops whose output size is found on the GPU (NonZero, Unique, NonMaxSuppression, Range over data) against
onnx.reference: the counted dim flows into later ops, changes between runs of one session, and a count past its
bound is refused in one line."""

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator
from oprefs import check_model, check_node, make_model

from webinfer.backend import WebinferRep
from webinfer.codegen.kernels import select
from webinfer.errors import WebinferError

rng = np.random.default_rng(0)


@pytest.mark.parametrize("x", [rng.random((3, 4)) > 0.6, rng.integers(-1, 2, (2, 3, 5)).astype(np.int64),
                               (rng.random(700) > 0.9).astype(np.float32), np.zeros((4, 2), np.float32)])
def test_nonzero(x):
    _, _, _, gpu = check_node("NonZero", {"x": x}, opset=13)
    assert gpu


def test_counted_dim_flows_on_and_changes_per_run():
    """x[NonZero(x > t)] * 2 (NonZero -> Transpose -> GatherND -> Mul): two runs of one session, two counts."""
    nodes = [helper.make_node("Greater", ["x", "t"], ["m"]), helper.make_node("NonZero", ["m"], ["nz"]),
             helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
             helper.make_node("GatherND", ["x", "idx"], ["v"]), helper.make_node("Mul", ["v", "two"], ["y"])]
    x = rng.standard_normal((5, 6)).astype(np.float32)
    feeds = {"x": x, "t": np.array(0.3, np.float32)}
    model = make_model(nodes, feeds, ["y"], initializers={"two": np.array(2.0, np.float32)}, opset=13)
    rep = WebinferRep(model)
    for t in (0.3, -0.5, 9.0):
        feeds["t"] = np.array(t, np.float32)
        (got,) = rep.run(feeds)
        np.testing.assert_allclose(got, ReferenceEvaluator(model).run(None, feeds)[0], rtol=1e-6)


@pytest.mark.parametrize("shape,axis", [((12,), None), ((3, 4), None), ((5, 3), 0), ((2, 6, 3), 1), ((2, 3, 4), -1)])
@pytest.mark.parametrize("sorted_", [1, 0])
def test_unique(shape, axis, sorted_):
    x = rng.integers(0, 3, shape).astype(np.float32)
    if axis is not None:  # repeat a slice so that slices repeat too
        x = np.concatenate([x, np.take(x, [0], axis=axis)], axis=axis)
    attrs = {"sorted": sorted_} | ({"axis": axis} if axis is not None else {})
    if not sorted_ and (axis or 0) % len(shape) != 0 or not sorted_ and axis is None and len(shape) > 1:
        # onnx.reference reorders unsorted results with np.take(x, indices, axis=0), wrong here: numpy instead
        _check_unique_unsorted_against_numpy(x, axis)
        return
    _, _, _, gpu = check_node("Unique", {"x": x}, n_outputs=4, opset=11, **attrs)
    assert gpu
    if sorted_:  # (with one output onnx.reference returns the sorted values whatever `sorted` says)
        check_node("Unique", {"x": x}, n_outputs=1, opset=11, **attrs)


@pytest.mark.parametrize("centers", [0, 1])
@pytest.mark.parametrize("limit,iou,score", [(3, 0.5, None), (10, 0.3, 0.4), (1, 0.0, 0.9)])
def test_nms(centers, limit, iou, score):
    b, c, n = 2, 3, 9
    lo = rng.uniform(0, 5, (b, n, 2)).astype(np.float32)
    boxes = np.concatenate([lo, lo + rng.uniform(0.5, 3, (b, n, 2)).astype(np.float32)], axis=2)
    scores = rng.random((b, c, n)).astype(np.float32)
    scores[0, 0, 3] = scores[0, 0, 5]  # a tie: the lower index first
    feeds = {"boxes": boxes, "scores": scores, "limit": np.array([limit], np.int64),
             "iou": np.array([iou], np.float32)}
    if score is not None:
        feeds["score"] = np.array([score], np.float32)
    _, _, _, gpu = check_node("NonMaxSuppression", feeds, opset=11, center_point_box=centers)
    assert gpu


def _range_of_data(dtype):
    """Range(Cast(a), limit, delta) with `a` a float input: start is data, so the length is found on the GPU."""
    to = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    nodes = [helper.make_node("Cast", ["a"], ["s"], to=to), helper.make_node("Range", ["s", "l", "d"], ["y"])]
    feeds = {"a": np.array(1, np.float32), "l": np.array(9, dtype), "d": np.array(2, dtype)}
    return make_model(nodes, feeds, ["y"], opset=13), feeds


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_range_of_data(dtype):
    model, feeds = _range_of_data(dtype)
    for start, limit, delta in ((1, 9, 2), (5, -3, -3), (2, 2, 1), (0.5, 3.9, 0.7)):
        if np.dtype(dtype).kind == "i" and isinstance(start, float):
            continue
        feeds.update(a=np.array(start, np.float32), l=np.array(limit, dtype), d=np.array(delta, dtype))
        _, _, placement, _ = check_model(model, feeds)
        assert {p["op"]: p["where"] for p in placement}["Range"] == "gpu"


def test_count_past_its_bound_is_refused(monkeypatch):
    monkeypatch.setattr(select, "RANGE_BOUND", 8)
    model, feeds = _range_of_data(np.float32)
    feeds.update(l=np.array(100, np.float32))
    with pytest.raises(WebinferError, match="more than the 8 this artifact was built for"):
        WebinferRep(model).run(feeds)


def _check_unique_unsorted_against_numpy(x: np.ndarray, axis):
    """webinfer's unsorted Unique (4 outputs) vs numpy's unique put back in first-occurrence order."""
    attrs = {"sorted": 0} | ({"axis": axis} if axis is not None else {})
    model = make_model([helper.make_node("Unique", ["x"], ["y", "i", "inv", "c"], **attrs)], {"x": x},
                       ["y", "i", "inv", "c"], opset=11)
    y, idx, inv, cnt = WebinferRep(model).run({"x": x})
    flat = x.reshape(-1) if axis is None else x
    _, first, inverse, counts = np.unique(flat, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    order = np.argsort(first)
    np.testing.assert_array_equal(idx, first[order])
    np.testing.assert_array_equal(y, np.take(flat, first[order], axis=0 if axis is None else axis))
    np.testing.assert_array_equal(cnt, counts[order])
    np.testing.assert_array_equal(inv, np.argsort(order)[inverse.reshape(-1)])


@pytest.mark.parametrize("axis", [None, 1])
def test_unique_unsorted_in_first_occurrence_order(axis):
    """Checked against numpy directly where onnx.reference's unsorted path is wrong (multi-dim input)."""
    x = rng.integers(0, 3, (3, 4)).astype(np.float32)
    x[:, 3] = x[:, 0]
    _check_unique_unsorted_against_numpy(x, axis)