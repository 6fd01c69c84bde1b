"""The activation and norm rules (fuse_activations.py, fuse_norms.py), each alone: it fires on a tiny graph
and the result computes what onnx.reference computes on the original; a look-alike that its condition (or
its pattern) refuses is left as it was."""

from __future__ import annotations

import math

import numpy as np
import onnx.helper as h
from fusion_util import model, randn
from rule_util import check_rule, rewrite

from webinfer.graph.passes.fuse_activations import GELU_ERF, GELU_TANH, SILU
from webinfer.graph.passes.fuse_norms import LAYER_NORM, RMS_NORM


def _consts(**kw):
    return {k: np.float32(v) for k, v in kw.items()}


def _gelu_erf(one=1.0, half=0.5, half_first=False):
    nodes = [h.make_node("Mul", ["x", "ir2"], ["a"]), h.make_node("Erf", ["a"], ["b"]),
             h.make_node("Add", ["b", "one"], ["c"])]
    if half_first:
        nodes += [h.make_node("Mul", ["x", "half"], ["hx"]), h.make_node("Mul", ["c", "hx"], ["out"])]
    else:
        nodes += [h.make_node("Mul", ["c", "x"], ["d"]), h.make_node("Mul", ["half", "d"], ["out"])]
    feeds = {"x": randn(3, 8) * 2}
    return model(nodes, feeds, ["out"], _consts(ir2=1 / math.sqrt(2), one=one, half=half)), feeds


def test_gelu_erf_fires_in_both_associations():
    for half_first in (False, True):
        p, feeds = _gelu_erf(half_first=half_first)
        assert check_rule(p, GELU_ERF, feeds, fires=True) == ["Gelu"]


def test_gelu_erf_condition_refuses_other_constants():
    p, feeds = _gelu_erf(one=1.5)
    assert "Gelu" not in check_rule(p, GELU_ERF, feeds, fires=False)


def _gelu_tanh(half=0.5, pow3=True):
    cube = ([h.make_node("Pow", ["x", "three"], ["x3"])] if pow3 else
            [h.make_node("Mul", ["x", "x"], ["x2"]), h.make_node("Mul", ["x2", "x"], ["x3"])])
    nodes = cube + [h.make_node("Mul", ["k", "x3"], ["kx3"]), h.make_node("Add", ["kx3", "x"], ["in"]),
                    h.make_node("Mul", ["in", "s"], ["t0"]), h.make_node("Tanh", ["t0"], ["t"]),
                    h.make_node("Add", ["one", "t"], ["c"]), h.make_node("Mul", ["x", "c"], ["d"]),
                    h.make_node("Mul", ["d", "half"], ["out"])]
    feeds = {"x": randn(2, 16) * 2}
    inits = _consts(three=3, k=0.044715, s=math.sqrt(2 / math.pi), one=1, half=half)
    return model(nodes, feeds, ["out"], inits), feeds


def test_gelu_tanh_fires_with_pow_or_products():
    for pow3 in (True, False):
        p, feeds = _gelu_tanh(pow3=pow3)
        assert check_rule(p, GELU_TANH, feeds, fires=True) == ["Gelu"]


def test_gelu_tanh_condition_refuses_another_half():
    p, feeds = _gelu_tanh(half=0.4)
    assert "Gelu" not in check_rule(p, GELU_TANH, feeds, fires=False)


def test_silu_fires_and_a_sigmoid_of_another_value_is_not_matched():
    feeds = {"x": randn(4, 6) * 3, "y": randn(4, 6)}
    p = model([h.make_node("Sigmoid", ["x"], ["s"]), h.make_node("Mul", ["x", "s"], ["out"])], feeds, ["out"])
    assert check_rule(p, SILU, feeds, fires=True) == ["Swish"]
    p = model([h.make_node("Sigmoid", ["x"], ["s"]), h.make_node("Mul", ["s", "y"], ["out"])], feeds, ["out"])
    n, _, matched = rewrite(p, SILU)
    assert (n, matched) == (0, False)


def _symbolic_last(p, name="n"):
    p.graph.input[0].type.tensor_type.shape.dim[-1].dim_param = name
    return p


def _rms(feeds, weight=True, reciprocal=True):
    nodes = [h.make_node("Mul", ["x", "x"], ["p"]), h.make_node("ReduceMean", ["p", "axes"], ["m"], keepdims=1),
             h.make_node("Add", ["m", "eps"], ["e"]), h.make_node("Sqrt", ["e"], ["s"])]
    if reciprocal:
        nodes += [h.make_node("Div", ["one", "s"], ["r"]), h.make_node("Mul", ["r", "x"], ["n"])]
    else:
        nodes += [h.make_node("Div", ["x", "s"], ["n"])]
    if weight:
        nodes.append(h.make_node("Mul", ["n", "w"], ["out"]))
    inits = {"axes": np.array([-1], np.int64), "eps": np.float32(1e-6), "one": np.float32(1), "w": randn(16)}
    return model(nodes, feeds, ["out" if weight else "n"], inits)


def test_rms_norm_fires_with_or_without_weight():
    feeds = {"x": randn(2, 3, 16)}
    assert check_rule(_rms(feeds), RMS_NORM, feeds, fires=True) == ["RMSNormalization"]
    assert check_rule(_rms(feeds, False, False), RMS_NORM, feeds, fires=True) == ["RMSNormalization"]


def test_rms_norm_condition_refuses_a_symbolic_row_length():
    feeds = {"x": randn(2, 16)}
    assert "RMSNormalization" not in check_rule(_symbolic_last(_rms(feeds)), RMS_NORM, feeds, fires=False)


def _layer_norm(feeds, affine=True):
    nodes = [h.make_node("ReduceMean", ["x"], ["mu"], axes=[-1]), h.make_node("Sub", ["x", "mu"], ["d"]),
             h.make_node("Pow", ["d", "two"], ["d2"]), h.make_node("ReduceMean", ["d2"], ["var"], axes=[-1]),
             h.make_node("Add", ["var", "eps"], ["ve"]), h.make_node("Sqrt", ["ve"], ["sd"]),
             h.make_node("Div", ["d", "sd"], ["nrm"])]
    if affine:
        nodes += [h.make_node("Mul", ["nrm", "g"], ["sc"]), h.make_node("Add", ["sc", "b"], ["out"])]
    inits = {"two": np.float32(2), "eps": np.float32(1e-5), "g": randn(12), "b": randn(12)}
    return model(nodes, feeds, ["out" if affine else "nrm"], inits if affine else {"two": inits["two"], "eps": inits["eps"]},
                 opset=17)


def test_layer_norm_fires_with_or_without_affine():
    feeds = {"x": randn(4, 7, 12) * 3 + 1}
    for affine in (True, False):
        assert check_rule(_layer_norm(feeds, affine), LAYER_NORM, feeds, fires=True, rtol=1e-4, atol=1e-5) == [
            "LayerNormalization"]


def test_layer_norm_condition_refuses_a_symbolic_row_length():
    feeds = {"x": randn(3, 12)}
    p = _symbolic_last(_layer_norm(feeds))
    assert "LayerNormalization" not in check_rule(p, LAYER_NORM, feeds, fires=False)
