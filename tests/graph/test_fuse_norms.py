"""fuse_norms: RMSNorm (torch dynamo's spelling) and LayerNorm (primitive spelling) become one kernel;
other reductions are left alone. Outputs are checked against ReferenceEvaluator on the original graph."""

from __future__ import annotations

import numpy as np
import onnx.helper as h
from fusion_util import after_pass, model, randn, run_checked


def _rms(weight: bool = True, reciprocal: bool = True):
    nodes = [h.make_node("Pow", ["x", "two"], ["p"]), h.make_node("ReduceMean", ["p", "axes"], ["m"], keepdims=1),
             h.make_node("Add", ["m", "eps"], ["e"]), h.make_node("Sqrt", ["e"], ["s"])]
    if reciprocal:
        nodes += [h.make_node("Reciprocal", ["s"], ["r"]), h.make_node("Mul", ["x", "r"], ["n"])]
    else:
        nodes += [h.make_node("Div", ["x", "s"], ["n"])]
    if weight:
        nodes.append(h.make_node("Mul", ["w", "n"], ["out"]))
    inits = {"two": np.float32(2), "axes": np.array([-1], np.int64), "eps": np.float32(1e-5), "w": randn(16)}
    return nodes, inits, "out" if weight else "n"


def test_rms_norm_dynamo_spelling_is_one_kernel():
    nodes, inits, out = _rms()
    feeds = {"x": randn(2, 3, 16)}
    p = model(nodes, feeds, [out], inits)
    assert after_pass(p, "fuse_norms") == ["RMSNormalization"]
    assert run_checked(p, feeds) == {"RMSNormalization": 1}


def test_rms_norm_without_weight_and_with_div():
    nodes, inits, out = _rms(weight=False, reciprocal=False)
    feeds = {"x": randn(5, 16)}
    p = model(nodes, feeds, [out], inits)
    assert run_checked(p, feeds) == {"RMSNormalization": 1}


def test_layer_norm_primitive_spelling_is_one_kernel():
    nodes = [h.make_node("ReduceMean", ["x"], ["mu"], axes=[-1]), h.make_node("Sub", ["x", "mu"], ["d"]),
             h.make_node("Pow", ["d", "two"], ["d2"]), h.make_node("ReduceMean", ["d2"], ["var"], axes=[-1]),
             h.make_node("Add", ["var", "eps"], ["ve"]), h.make_node("Sqrt", ["ve"], ["sd"]),
             h.make_node("Div", ["d", "sd"], ["nrm"]), h.make_node("Mul", ["nrm", "g"], ["sc"]),
             h.make_node("Add", ["sc", "b"], ["out"])]
    feeds = {"x": randn(4, 7, 12) * 3 + 1}
    p = model(nodes, feeds, ["out"], {"two": np.float32(2), "eps": np.float32(1e-6), "g": randn(12), "b": randn(12)},
              opset=17)
    assert after_pass(p, "fuse_norms") == ["LayerNormalization"]
    assert run_checked(p, feeds) == {"LayerNormalization": 1}


def test_not_matched_on_another_axis_or_an_escaping_intermediate():
    nodes, inits, out = _rms()
    inits["axes"] = np.array([0], np.int64)
    feeds = {"x": randn(2, 3, 16)}
    p = model(nodes, feeds, [out], inits)
    assert "RMSNormalization" not in after_pass(p, "fuse_norms")
    run_checked(p, feeds)
    nodes, inits, out = _rms()
    p = model(nodes, feeds, [out, "m"], inits)  # the mean square is also an output
    assert "RMSNormalization" not in after_pass(p, "fuse_norms")
    run_checked(p, feeds)
