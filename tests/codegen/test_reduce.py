"""Reductions and ArgMax/ArgMin against onnx.reference: axes as attribute and input, keepdims, negative and
empty axes, size-1 dims, both kernel modes (loop per row and workgroup per row)."""

import numpy as np
import pytest
from oprefs import TARGETS, check_node

from webinfer.codegen.kernels import reduce as R

rng = np.random.default_rng(1)
OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
       "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]
CASES = [((3, 4, 5), [1]), ((3, 4, 5), [0, 2]), ((3, 4, 5), [-1]), ((2, 1, 6), [1, 2]), ((4,), [0]),
         ((2, 3, 4, 5), [1, 2]), ((5, 1), [0]), ((2, 3), None)]


def f32(shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def _data(op, shape):
    if op in ("ReduceLogSum", "ReduceProd"):
        return f32(shape, 0.5, 1.5)
    return f32(shape)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape,axes", CASES)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_axes_input(op, shape, axes, keepdims):
    x = _data(op, shape)
    inits = {"axes": np.array(axes, np.int64)} if axes is not None else None
    _, _, _, gpu = check_node(op, {"x": x}, initializers=inits, keepdims=keepdims)
    assert gpu


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceMax", "ReduceL2", "ReduceLogSumExp"])
def test_reduce_axes_attribute(op):
    """Before opset 18 (13 for ReduceSum) axes is an attribute."""
    x = _data(op, (3, 4, 5))
    check_node(op, {"x": x}, opset=13, axes=[0, -1], keepdims=0)
    check_node(op, {"x": x}, opset=17, keepdims=1)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceMean"])
def test_reduce_int64(op):
    x = rng.integers(-5, 6, size=(3, 4)).astype(np.int64)
    check_node(op, {"x": x}, initializers={"axes": np.array([1], np.int64)})


def test_reduce_bool_max_min():
    x = rng.random((3, 4)) > 0.5
    for op in ["ReduceMax", "ReduceMin"]:
        check_node(op, {"x": x}, initializers={"axes": np.array([0], np.int64)}, opset=20)


def test_noop_with_empty_axes():
    x = f32((3, 4))
    check_node("ReduceSum", {"x": x}, noop_with_empty_axes=1)
    check_node("ReduceL2", {"x": x}, noop_with_empty_axes=1)
    check_node("ReduceLogSumExp", {"x": x}, initializers={"axes": np.zeros((0,), np.int64)}, noop_with_empty_axes=0)


@pytest.mark.parametrize("shape,axes", [((2, 1000), [1]), ((3, 600, 2), [1]), ((1, 700), [0, 1]), ((4, 300), [1])])
@pytest.mark.parametrize("mode", ["loop", "wg"])
def test_long_rows_both_modes(monkeypatch, shape, axes, mode):
    monkeypatch.setattr(R, "choose_mode", lambda rows, n, kclass: mode)
    x = f32(shape)
    for op in ["ReduceSum", "ReduceMax", "ReduceLogSumExp"]:
        check_node(op, {"x": x}, initializers={"axes": np.array(axes, np.int64)}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape,axes", [((5, 100), [1]), ((3, 70, 2), [1]), ((1, 1000), [1]), ((40, 3), [0])])
def test_row_reductions_per_class(target, shape, axes):
    """Every statistic (sum, max, min, product, arg index) on rows long enough for the GPU class's
    workgroup-per-row kernel (subgroup partials under gpu-subgroups) and across strided rows."""
    inits = {"axes": np.array(axes, np.int64)}
    for op in OPS:
        check_node(op, {"x": _data(op, shape)}, initializers=inits, rtol=1e-4, atol=1e-4, target=target)
    for op in ("ArgMax", "ArgMin"):
        check_node(op, {"x": rng.integers(0, 5, size=shape).astype(np.float32)}, axis=axes[0], target=target,
                   select_last_index=int(op == "ArgMin"))
    ints = rng.integers(-9, 9, size=shape).astype(np.int64)
    for op in ("ReduceSum", "ReduceMax", "ReduceMin"):
        check_node(op, {"x": ints}, initializers=inits, target=target)
    check_node("ReduceMax", {"x": rng.random(shape) > 0.9}, initializers=inits, opset=20, target=target)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("last", [0, 1])
def test_arg(op, axis, keepdims, last):
    x = rng.integers(0, 4, size=(3, 4, 5)).astype(np.float32)  # ties, so select_last_index matters
    check_node(op, {"x": x}, axis=axis, keepdims=keepdims, select_last_index=last)


def test_arg_int_and_long_rows(monkeypatch):
    check_node("ArgMax", {"x": rng.integers(-9, 9, size=(4, 6)).astype(np.int64)}, axis=1)
    monkeypatch.setattr(R, "choose_mode", lambda rows, n, kclass: "wg")
    check_node("ArgMin", {"x": f32((3, 1000))}, axis=1)
    check_node("ArgMax", {"x": rng.integers(0, 3, size=(2, 700)).astype(np.float32)}, axis=1, select_last_index=1)


@pytest.mark.parametrize("shape,axis", [((5,), 0), ((3, 4), 1), ((3, 4), -2), ((2, 3, 4), 1), ((1, 6), 0)])
@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
def test_cumsum(shape, axis, exclusive, reverse):
    check_node("CumSum", {"x": f32(shape)}, initializers={"axis": np.array(axis, np.int64)},
               exclusive=exclusive, reverse=reverse)


def test_cumsum_int():
    x = rng.integers(-9, 9, size=(3, 5)).astype(np.int32)
    check_node("CumSum", {"x": x}, initializers={"axis": np.array(1, np.int32)}, reverse=1)


@pytest.mark.parametrize("shape,axis,k", [((3, 10), -1, 3), ((3, 10), 0, 2), ((2, 5, 4), 1, 5), ((6,), 0, 1),
                                          ((4, 1), 0, 4)])
@pytest.mark.parametrize("largest", [0, 1])
def test_topk(shape, axis, k, largest):
    x = rng.integers(0, 5, size=shape).astype(np.float32)  # ties: lower index first
    check_node("TopK", {"x": x}, n_outputs=2, initializers={"k": np.array([k], np.int64)}, axis=axis,
               largest=largest)
    check_node("TopK", {"x": rng.integers(-20, 20, size=shape).astype(np.int64)}, n_outputs=2,
               initializers={"k": np.array([k], np.int64)}, axis=axis, largest=largest)


@pytest.mark.parametrize("shape,axis,exclusive,reverse", [((5,), 0, 0, 0), ((3, 4), 1, 1, 0), ((2, 3, 4), -2, 0, 1),
                                                          ((4, 3), 0, 1, 1)])
def test_cumprod(shape, axis, exclusive, reverse):
    x = (rng.random(shape) + 0.5).astype(np.float32)
    check_node("CumProd", {"x": x}, initializers={"axis": np.array(axis, np.int64)}, opset=26,
               exclusive=exclusive, reverse=reverse)
    check_node("CumProd", {"x": rng.integers(-3, 4, size=shape).astype(np.int32)},
               initializers={"axis": np.array(axis, np.int32)}, opset=26, reverse=reverse)


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceMax"])
def test_long_symbolic_row(op):
    """A row of symbolic length past 65535 elements (a waveform): lavapipe stops a shader loop after 65535
    iterations, so one invocation per row summed only the first 65535 (docs/notes.md)."""
    from onnx import TensorProto, helper
    from oprefs import check_shapes

    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], keepdims=1)], "long",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                          [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])

    def feeds(n):
        x = f32((n,), 0.0, 1.0)
        x[-1] = 5.0  # (the maximum past the first 65535)
        return {"x": x}

    check_shapes(model, feeds, [70001, 200000])


@pytest.mark.parametrize("op,shape", [("Softmax", (3, 40000)), ("ReduceSum", (3, 70000)), ("ArgMax", (4, 50000))])
def test_rows_longer_than_llvmpipe_loops_on_many_rows(op, shape):
    """llvmpipe's loop limiter ends an invocation's loops after some 30,000 iterations in all: a softmax of 3 rows of
    40,000 (three passes) came out wrong from the loop-per-row kernel; rows this long take a workgroup each."""
    x = f32(shape)
    if op == "ReduceSum":
        check_node(op, {"x": x}, initializers={"axes": np.array([1], np.int64)}, keepdims=0, rtol=1e-4, atol=1e-4)
    else:
        check_node(op, {"x": x}, axis=1, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape,axis,k", [((3, 30000), 1, 3), ((40000, 2), 0, 4), ((2, 3000), 1, 5)])
@pytest.mark.parametrize("largest", [0, 1])
def test_topk_of_long_rows_takes_a_workgroup(monkeypatch, shape, axis, k, largest):
    """k passes over a row of 30,000 outran llvmpipe's loop limiter (wrong values and indices, no error): long rows
    take a workgroup each (topk_wg.wgsl.j2); ties (lower index first) and strided rows as before. The last case
    forces the workgroup kernel on a short row."""
    from webinfer.codegen.kernels import topk as TK

    if shape[1] == 3000:
        monkeypatch.setattr(TK, "LOOP_MAX", 0)
    x = rng.integers(0, 700, size=shape).astype(np.float32)
    check_node("TopK", {"x": x}, n_outputs=2, initializers={"k": np.array([k], np.int64)}, axis=axis,
               largest=largest)
    ints = rng.integers(-50, 50, size=shape).astype(np.int64)
    check_node("TopK", {"x": ints}, n_outputs=2, initializers={"k": np.array([k], np.int64)}, axis=axis,
               largest=largest)
