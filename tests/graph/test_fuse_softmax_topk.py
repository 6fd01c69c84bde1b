"""fuse_softmax_topk: Softmax then TopK over the last axis run as one kernel that writes the probabilities and
selects the k best. Outputs are checked against ReferenceEvaluator on the original graph."""

from __future__ import annotations

import numpy as np
import onnx.helper as h
import pytest
from fusion_util import after_pass, model, randn, run_checked

PASS = "fuse_softmax_topk"


@pytest.mark.parametrize("target", ["software", "gpu"])
@pytest.mark.parametrize("largest", [1, 0])
def test_probabilities_and_top_k_in_one_kernel(target, largest):
    nodes = [h.make_node("Softmax", ["x"], ["p"], axis=-1), h.make_node("TopK", ["p", "k"], ["v", "i"], largest=largest)]
    feeds = {"x": randn(2, 3, 10) * 3}
    p = model(nodes, feeds, ["p", "v", "i"], {"k": np.array([4], np.int64)})  # the probabilities stay an output
    assert after_pass(p, PASS) == ["SoftmaxTopK"]
    assert run_checked(p, feeds, target=target) == {"SoftmaxTopK": 1}


def test_ties_rank_by_lowest_index_and_other_users_keep_the_probabilities():
    nodes = [h.make_node("Softmax", ["x"], ["p"], axis=1), h.make_node("Mul", ["p", "two"], ["q"]),
             h.make_node("TopK", ["p", "k"], ["v", "i"])]
    x = np.array([[1.0, 3.0, 3.0, -2.0, 3.0, 0.5], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]], np.float32)
    p = model(nodes, {"x": x}, ["q", "v", "i"], {"k": np.array([3], np.int64), "two": np.float32(2)})
    assert after_pass(p, PASS) == ["SoftmaxTopK", "Mul"]
    run_checked(p, {"x": x})


def test_not_fused_across_axes():
    nodes = [h.make_node("Softmax", ["x"], ["p"], axis=1), h.make_node("TopK", ["p", "k"], ["v", "i"], axis=-1)]
    feeds = {"x": randn(2, 5, 4)}
    p = model(nodes, feeds, ["v", "i"], {"k": np.array([2], np.int64)})
    assert after_pass(p, PASS) == ["Softmax", "TopK"]
    run_checked(p, feeds)


def test_softmax_top_k_of_a_long_row():
    """A vocabulary-sized row (32,000): the fused kernel reduces and selects with a workgroup per row."""
    nodes = [h.make_node("Softmax", ["x"], ["p"], axis=-1), h.make_node("TopK", ["p", "k"], ["v", "i"])]
    feeds = {"x": randn(2, 32000) * 3}
    p = model(nodes, feeds, ["p", "v", "i"], {"k": np.array([5], np.int64)})
    assert after_pass(p, PASS) == ["SoftmaxTopK"]
    assert run_checked(p, feeds) == {"SoftmaxTopK": 1}
