"""fuse_activations: GELU (erf form, both orders of the 0.5) and SiLU (Sigmoid then Mul) become one op;
look-alikes are left alone. Outputs are checked against ReferenceEvaluator on the original graph."""

from __future__ import annotations

import math

import numpy as np
import onnx.helper as h
from fusion_util import after_pass, model, randn, run_checked

C = {"r2": np.float32(math.sqrt(2)), "ir2": np.float32(1 / math.sqrt(2)), "one": np.float32(1),
     "half": np.float32(0.5), "onep5": np.float32(1.5)}


def _gelu(half_first: bool, scale=("Div", "r2"), one="one"):
    nodes = [h.make_node(scale[0], ["x", scale[1]], ["a"]), h.make_node("Erf", ["a"], ["b"]),
             h.make_node("Add", [one, "b"], ["c"])]
    if half_first:
        nodes += [h.make_node("Mul", ["half", "x"], ["hx"]), h.make_node("Mul", ["hx", "c"], ["out"])]
    else:
        nodes += [h.make_node("Mul", ["x", "c"], ["d"]), h.make_node("Mul", ["d", "half"], ["out"])]
    return nodes


def test_gelu_erf_spellings_become_gelu():
    feeds = {"x": randn(3, 10) * 2}
    for nodes in (_gelu(False), _gelu(True, ("Mul", "ir2"))):
        p = model(nodes, feeds, ["out"], C)
        assert after_pass(p, "fuse_activations") == ["Gelu"]
        assert run_checked(p, feeds) == {"Gelu": 1}


def test_silu_becomes_swish():
    nodes = [h.make_node("Sigmoid", ["x"], ["s"]), h.make_node("Mul", ["s", "x"], ["out"])]
    feeds = {"x": randn(4, 6) * 3}
    p = model(nodes, feeds, ["out"])
    assert after_pass(p, "fuse_activations") == ["Swish"]
    assert run_checked(p, feeds) == {"Swish": 1}


def test_look_alikes_are_not_rewritten():
    feeds = {"x": randn(3, 10), "y": randn(3, 10)}
    p = model(_gelu(False, one="onep5"), feeds, ["out"], C)  # 1.5 + erf: not GELU
    assert "Gelu" not in after_pass(p, "fuse_activations")
    run_checked(p, feeds)
    p = model([h.make_node("Sigmoid", ["x"], ["s"]), h.make_node("Mul", ["s", "y"], ["out"])], feeds, ["out"])
    assert after_pass(p, "fuse_activations") == ["Sigmoid", "Mul"]
    run_checked(p, feeds)
