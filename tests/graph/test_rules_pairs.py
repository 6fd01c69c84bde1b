"""The two-node rules (conv_bn, matmul_gemm, fuse_softmax_topk), each alone: it fires on a tiny graph and the
result computes what onnx.reference computes on the original; a look-alike its condition refuses stays."""

from __future__ import annotations

import numpy as np
import onnx.helper as h
from fusion_util import model, randn
from rule_util import check_rule

from webinfer.graph.passes.conv_bn import CONV_BN
from webinfer.graph.passes.fuse_softmax_topk import SOFTMAX_TOPK
from webinfer.graph.passes.matmul_gemm import MATMUL_ADD_GEMM


def _conv_bn(feeds, inits, bias=True):
    conv = h.make_node("Conv", ["x", "w", "cb"] if bias else ["x", "w"], ["c"], pads=[1, 1, 1, 1])
    bn = h.make_node("BatchNormalization", ["c", "g", "beta", "mean", "var"], ["out"], epsilon=1e-3)
    stats = {"g": randn(4), "beta": randn(4), "mean": randn(4), "var": np.abs(randn(4)) + 0.5}
    return model([conv, bn], feeds, ["out"], {**inits, **stats, **({"cb": randn(4)} if bias else {})})


def test_conv_bn_folds_with_or_without_a_conv_bias():
    feeds = {"x": randn(1, 3, 6, 6)}
    for bias in (True, False):
        p = _conv_bn(feeds, {"w": randn(4, 3, 3, 3)}, bias)
        assert check_rule(p, CONV_BN, feeds, fires=True, rtol=1e-4, atol=1e-5) == ["Conv"]


def test_conv_bn_condition_refuses_a_weight_that_is_an_input():
    feeds = {"x": randn(1, 3, 6, 6), "w": randn(4, 3, 3, 3)}
    p = _conv_bn(feeds, {})
    assert check_rule(p, CONV_BN, feeds, fires=False) == ["Conv", "BatchNormalization"]


def _matmul_add(bias):
    feeds = {"x": randn(3, 4)}
    nodes = [h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Add", ["b", "m"], ["out"])]
    return model(nodes, feeds, ["out"], {"w": randn(4, 5), "b": bias}), feeds


def test_matmul_add_becomes_gemm_for_each_bias_gemm_broadcasts():
    for bias in (randn(5), randn(1, 5), np.float32(0.5)):
        p, feeds = _matmul_add(bias)
        assert check_rule(p, MATMUL_ADD_GEMM, feeds, fires=True) == ["Gemm"]


def test_matmul_add_condition_refuses_a_full_bias():
    p, feeds = _matmul_add(randn(3, 5))  # (Gemm's C broadcasts one way only; this one is (M, N): kept apart)
    assert check_rule(p, MATMUL_ADD_GEMM, feeds, fires=False) == ["MatMul", "Add"]


def _softmax_topk(axis):
    feeds = {"x": randn(2, 10) * 3}
    nodes = [h.make_node("Softmax", ["x"], ["p"], axis=axis), h.make_node("TopK", ["p", "k"], ["v", "i"])]
    return model(nodes, feeds, ["v", "i"], {"k": np.array([3], np.int64)}), feeds


def test_softmax_topk_fires_over_the_last_axis():
    p, feeds = _softmax_topk(-1)
    assert check_rule(p, SOFTMAX_TOPK, feeds, fires=True) == ["SoftmaxTopK"]


def test_softmax_topk_condition_refuses_another_softmax_axis():
    p, feeds = _softmax_topk(0)
    assert check_rule(p, SOFTMAX_TOPK, feeds, fires=False) == ["Softmax", "TopK"]
