"""The attention rule (fuse_attention.py) alone, on the graph the pipeline hands it, then built as is and run
against onnx.reference on the original: it fires on q·kᵀ -> scale -> + mask -> Softmax -> ·v; a mask
broadcast over the keys is refused by its condition."""

from __future__ import annotations

import numpy as np
import onnx.helper as h
from fusion_util import model, randn
from rule_util import check_rule_built

from webinfer.graph.passes.fuse_attention import ATTENTION


def _attention(mask_keys: int):
    nodes = [h.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]), h.make_node("MatMul", ["q", "kt"], ["s"]),
             h.make_node("Mul", ["s", "c"], ["ss"]), h.make_node("Add", ["ss", "mask"], ["sm"]),
             h.make_node("Softmax", ["sm"], ["p"], axis=-1), h.make_node("MatMul", ["p", "v"], ["y"])]
    feeds = {"q": randn(1, 2, 6, 8), "k": randn(1, 2, 6, 8), "v": randn(1, 2, 6, 8),
             "mask": np.where(randn(1, 1, 6, mask_keys) > 1, -1e4, 0).astype(np.float32)}
    return model(nodes, feeds, ["y"], {"c": np.float32(8 ** -0.5)}), feeds


def test_attention_fires_on_scaled_masked_scores():
    p, feeds = _attention(6)
    assert check_rule_built(p, ATTENTION, "fuse_attention", feeds, fires=True, atol=1e-5) == ["Attention"]


def test_attention_condition_refuses_a_mask_broadcast_over_the_keys():
    p, feeds = _attention(1)
    assert "Softmax" in check_rule_built(p, ATTENTION, "fuse_attention", feeds, fires=False, atol=1e-5)
