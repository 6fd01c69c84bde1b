"""NaN and infinities propagate as onnxruntime propagates them (issue 15).

Elementwise ops (Relu, Max/Min, Clip, HardSigmoid, Tanh, Sign, Pow, Mod, the trigonometric family, ...),
their fused forms (FusedElementwise, matmul and conv epilogues), Softmax/LogSoftmax, LogSumExp and TopK are
compared with onnxruntime's CPU provider. For ReduceMax/ReduceMin, ArgMax/ArgMin, Hardmax and MaxPool
onnxruntime is not consistent (whether a NaN wins depends on where it sits in the row: see docs/notes.md):
there a NaN wins as in numpy, and the reference is onnx's ReferenceEvaluator (numpy for MaxPool, whose
reference implementation lets a NaN lose).
"""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from oprefs import TARGETS

from webinfer.backend import WebinferRep

SPECIAL = np.array([np.nan, np.inf, -np.inf, 1.5, -1.5, 0.0, -0.25, 3.0, -0.0, 0.5, 1.0, -1.0], np.float32)
# Every pair of special values meets in x[i, j] and y[i, j]; rows hold each special value at several places.
X = np.stack([np.roll(SPECIAL, k) for k in range(len(SPECIAL))])
Y = np.stack([np.roll(SPECIAL[::-1], 2 * k + 1) for k in range(len(SPECIAL))])

UNARY = ["Relu", "Abs", "Neg", "Exp", "Log", "Sqrt", "Sigmoid", "Tanh", "Softplus", "Softsign", "Elu", "Selu",
         "HardSigmoid", "HardSwish", "Erf", "Sign", "Floor", "Ceil", "Round", "Sin", "Cos", "Tan", "Atan", "Asin",
         "Acos", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Reciprocal", "Celu", "ThresholdedRelu", "Mish",
         "Shrink", "LeakyRelu", "IsNaN", "IsInf", "Gelu"]
BINARY = ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "PRelu", "Greater", "Less", "Equal"]


def _consts(**arrays):
    return [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in arrays.items()]


def _model(nodes, outputs, inits=(), opset=20):
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(X.shape)) for n in ("x", "y")]
    g = helper.make_graph(nodes, "nan", inputs, [helper.make_empty_tensor_value_info(o) for o in outputs],
                          list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _elementwise_model():
    nodes, outs = [], []
    for op in UNARY:
        nodes.append(helper.make_node(op, ["x"], [f"u_{op}"]))
        outs.append(f"u_{op}")
    for op in BINARY:
        nodes.append(helper.make_node(op, ["x", "y"], [f"b_{op}"]))
        outs.append(f"b_{op}")
    nodes += [helper.make_node("Mod", ["x", "y"], ["fmod"], fmod=1),
              helper.make_node("Clip", ["x", "lo", "hi"], ["clip"]),
              helper.make_node("Clip", ["x", "lo"], ["clip_lo"]),
              helper.make_node("Clip", ["x", "", "hi"], ["clip_hi"]),
              helper.make_node("Clip", ["x"], ["clip_none"]),
              # fused: a FusedElementwise chain and matmul/conv epilogues (the graph passes make them)
              helper.make_node("Relu", ["x"], ["f1"]), helper.make_node("Mul", ["f1", "two"], ["f2"]),
              helper.make_node("Max", ["f2", "y"], ["fused_chain"]),
              helper.make_node("MatMul", ["x", "eye"], ["mm"]), helper.make_node("Relu", ["mm"], ["mm_relu"]),
              helper.make_node("MatMul", ["x", "eye"], ["mm2"]),
              helper.make_node("Clip", ["mm2", "zero", "six"], ["mm_clip"]),
              helper.make_node("Reshape", ["x", "nchw"], ["x4"]),
              helper.make_node("Conv", ["x4", "w1"], ["cv"]), helper.make_node("Relu", ["cv"], ["conv_relu"])]
    outs += ["fmod", "clip", "clip_lo", "clip_hi", "clip_none", "fused_chain", "mm_relu", "mm_clip", "conv_relu"]
    inits = _consts(lo=-1.0, hi=1.0, two=2.0, zero=0.0, six=6.0, eye=np.eye(len(SPECIAL)), w1=np.ones((1, 1, 1, 1)))
    inits.append(numpy_helper.from_array(np.array([1, 1, *X.shape], np.int64), "nchw"))
    return _model(nodes, outs, inits)


def _ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in model.graph.output], sess.run(None, feeds)))


def _compare(model, refs, target, feeds):
    got = WebinferRep(model, target=target).run(feeds)
    bad = []
    for o, g in zip(model.graph.output, got):
        r, g = np.asarray(refs[o.name]), np.asarray(g)
        assert g.shape == r.shape, o.name
        if r.dtype.kind == "f":
            ok = np.isclose(g, r, rtol=1e-4, atol=1e-5, equal_nan=True)
            ok &= np.isnan(g) == np.isnan(r)
        else:
            ok = g == r
        if not ok.all():
            i = tuple(np.argwhere(~ok)[0])
            bad.append(f"{o.name}: {(~ok).sum()} differ, e.g. at {i}: reference {r[i]} got {g[i]}")
    assert not bad, "\n".join(bad)


@pytest.fixture(scope="module")
def elementwise():
    model = _elementwise_model()
    return model, _ort(model, {"x": X, "y": Y})


@pytest.mark.parametrize("target", TARGETS)
def test_elementwise_nan_inf_like_onnxruntime(elementwise, target):
    model, refs = elementwise
    _compare(model, refs, target, {"x": X, "y": Y})


def _rows_model(opset=18):
    nodes, outs = [], []
    for axis in (0, 1):
        for op in ("Softmax", "LogSoftmax"):
            nodes.append(helper.make_node(op, ["x"], [f"{op}{axis}"], axis=axis))
            outs.append(f"{op}{axis}")
        nodes.append(helper.make_node("ReduceLogSumExp", ["x", f"ax{axis}"], [f"lse{axis}"]))
        nodes.append(helper.make_node("TopK", ["x", "k"], [f"topv{axis}", f"topi{axis}"], axis=axis))
        nodes.append(helper.make_node("TopK", ["x", "k"], [f"lowv{axis}", f"lowi{axis}"], axis=axis, largest=0))
        outs += [f"lse{axis}", f"topv{axis}", f"topi{axis}", f"lowv{axis}", f"lowi{axis}"]
    inits = [numpy_helper.from_array(np.array([a], np.int64), f"ax{a}") for a in (0, 1)]
    inits.append(numpy_helper.from_array(np.array([5], np.int64), "k"))
    return _model(nodes, outs, inits, opset)


@pytest.mark.parametrize("target", TARGETS)
def test_softmax_logsumexp_topk_like_onnxruntime(target):
    model = _rows_model()
    _compare(model, _ort(model, {"x": X, "y": Y}), target, {"x": X, "y": Y})


def _max_family_model():
    nodes, outs = [], []
    for axis in (0, 1):
        for op in ("ReduceMax", "ReduceMin"):
            nodes.append(helper.make_node(op, ["x", f"ax{axis}"], [f"{op}{axis}"]))
            outs.append(f"{op}{axis}")
        for op in ("ArgMax", "ArgMin"):
            nodes.append(helper.make_node(op, ["x"], [f"{op}{axis}"], axis=axis))
            outs.append(f"{op}{axis}")
        nodes.append(helper.make_node("Hardmax", ["x"], [f"hardmax{axis}"], axis=axis))
        outs.append(f"hardmax{axis}")
    nodes += [helper.make_node("Reshape", ["x", "nchw"], ["x4"]),
              helper.make_node("MaxPool", ["x4"], ["maxpool"], kernel_shape=[2, 3], strides=[2, 3]),
              helper.make_node("GlobalMaxPool", ["x4"], ["gmaxpool"])]
    outs += ["maxpool", "gmaxpool"]
    inits = [numpy_helper.from_array(np.array([a], np.int64), f"ax{a}") for a in (0, 1)]
    inits.append(numpy_helper.from_array(np.array([1, 1, *X.shape], np.int64), "nchw"))
    return _model(nodes, outs, inits, 18)


@pytest.mark.parametrize("target", TARGETS)
def test_max_family_nan_wins_like_numpy(target):
    model = _max_family_model()
    refs = dict(zip([o.name for o in model.graph.output], ReferenceEvaluator(model).run(None, {"x": X, "y": Y})))
    assert np.isnan(refs["ReduceMax1"]).sum() == len(SPECIAL)  # the reference does propagate
    # ReferenceEvaluator's MaxPool does not (it compares with >): numpy's max over the 2x3 windows
    refs["maxpool"] = X.reshape(6, 2, 4, 3).max(axis=(1, 3))[None, None]
    _compare(model, refs, target, {"x": X, "y": Y})
