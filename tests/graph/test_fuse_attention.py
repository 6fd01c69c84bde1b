"""fuse_attention: Softmax(q·kᵀ [scale] [+ mask])·v in primitives -> one attention kernel, head split and merge
absorbed; and the encoder block it serves (with GELU's erf and tanh spellings) against onnxruntime, per kernel
class. Patterns that must not match keep their primitives and still compute the same result."""

from __future__ import annotations

import numpy as np
import onnx.helper as h
import onnxruntime as ort
import pytest
from fusion_util import after_pass, model, randn, run_checked

from benchmarks.fusion_counts import encoder_block
from webinfer.backend import WebinferRep


def _ort(proto, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def _dispatches(rep) -> dict:
    out: dict = {}
    for p in rep.placement:
        out[p["op"]] = out.get(p["op"], 0) + p["dispatches"]
    return out


@pytest.mark.parametrize("target", ["software", "gpu"])
@pytest.mark.parametrize("spelling", [dict(mask=True, gelu="erf", scale_on="scores"),
                                      dict(mask=False, gelu="tanh", scale_on="qk"),
                                      dict(mask=True, gelu="erf", scale_on="scores", cross=True)])
def test_encoder_block_matches_onnxruntime_in_few_kernels(spelling, target):
    proto, feeds = encoder_block(**spelling)
    rep = WebinferRep(proto, target=target)
    got = rep.run(feeds)
    np.testing.assert_allclose(got[0], _ort(proto, feeds)[0], rtol=1e-4, atol=1e-4)
    ran = _dispatches(rep)
    assert ran.get("Attention") == 1 and "Softmax" not in ran and "Transpose" not in ran, ran
    # 2 norms, one q/k/v projection (three when k and v read another input), attention, output projection
    # (+ residual), the MLP in 2 (GELU and residual in the epilogues)
    assert sum(ran.values()) == (9 if spelling.get("cross") else 7), ran
    assert sum(ran.values()) <= 0.3 * len(proto.graph.node)


def _vit_4d(kt_given: bool):
    """q, k, v already [b, h, s, d] (no head split to absorb); kᵀ as Transpose(k) or given whole."""
    nodes = [h.make_node("MatMul", ["q", "kt" if kt_given else "ktt"], ["s"]),
             h.make_node("Mul", ["s", "c"], ["ss"]), h.make_node("Softmax", ["ss"], ["p"], axis=3),
             h.make_node("MatMul", ["p", "v"], ["y"])]
    if not kt_given:
        nodes.insert(0, h.make_node("Transpose", ["k"], ["ktt"], perm=[0, 1, 3, 2]))
    feeds = {"q": randn(2, 3, 10, 8), "v": randn(2, 3, 10, 8)}
    feeds["kt" if kt_given else "k"] = randn(2, 3, 8, 10) if kt_given else randn(2, 3, 10, 8)
    return model(nodes, feeds, ["y"], {"c": np.float32(8 ** -0.5)}), feeds


@pytest.mark.parametrize("kt_given", [False, True])
def test_four_d_operands_without_head_split(kt_given):
    proto, feeds = _vit_4d(kt_given)
    assert "Softmax" not in after_pass(proto, "fuse_attention")
    ran = run_checked(proto, feeds)
    assert ran["Attention"] == 1 and "Softmax" not in ran and sum(ran.values()) == 1 + kt_given, ran


def _scores_model(softmax_axis: int = -1, mask_shape=(1, 1, 1, 6), extra_output: str | None = None):
    nodes = [h.make_node("MatMul", ["q", "kt"], ["s"]), h.make_node("Add", ["s", "m"], ["sm"]),
             h.make_node("Softmax", ["sm"], ["p"], axis=softmax_axis), h.make_node("MatMul", ["p", "v"], ["y"])]
    feeds = {"q": randn(1, 2, 6, 4), "kt": randn(1, 2, 4, 6), "v": randn(1, 2, 6, 4), "m": randn(*mask_shape)}
    return model(nodes, feeds, ["y"] + ([extra_output] if extra_output else []), opset=18), feeds


@pytest.mark.parametrize("case", ["axis", "mask over keys", "probs escape"])
def test_not_matched(case):
    proto, feeds = {"axis": lambda: _scores_model(softmax_axis=2),
                    "mask over keys": lambda: _scores_model(mask_shape=(1, 1, 6, 1)),
                    "probs escape": lambda: _scores_model(extra_output="p")}[case]()
    assert "Softmax" in after_pass(proto, "fuse_attention")
    assert "Attention" not in run_checked(proto, feeds)


def test_mask_broadcast_over_heads_and_queries_matches():
    proto, feeds = _scores_model(mask_shape=(1, 1, 1, 6))
    assert after_pass(proto, "fuse_attention") == ["Transpose", "Attention"]  # kᵀ given whole: k made once
    assert run_checked(proto, feeds) == {"Transpose": 1, "Attention": 1}
