"""Attention contrib ops (graph/contrib/attention.py) against onnxruntime: RotaryEmbedding, MultiHeadAttention,
Attention and GroupQueryAttention (prompt and decode steps with past/present)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from .ort_ref import MS, check_ort, contrib_model

RNG = np.random.default_rng(2)


def _f(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def _caches(max_pos: int, half: int):
    angles = np.arange(max_pos)[:, None] / (10000 ** (np.arange(half) / half))[None]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


@pytest.mark.parametrize("rank,interleaved,rot", [(3, 0, 0), (3, 1, 0), (4, 0, 0), (3, 0, 8)])
def test_rotary_embedding(rank, interleaved, rot):
    b, s, heads, d = 2, 5, 3, 16
    x = _f(b, s, heads * d) if rank == 3 else _f(b, heads, s, d)
    pos = RNG.integers(0, 32, (b, s)).astype(np.int64)
    cos, sin = _caches(32, (rot or d) // 2)
    attrs = {"interleaved": interleaved}
    if rot:
        attrs.update(rotary_embedding_dim=rot, num_heads=heads)
    node = helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain=MS, **attrs)
    feeds = {"x": x, "pos": pos}
    check_ort(contrib_model([node], feeds, ["y"], {"cos": cos, "sin": sin}), feeds)


@pytest.mark.parametrize("case", ["plain", "bias", "padding", "causal_past", "cross_4d"])
def test_multi_head_attention(case):
    b, s, heads, d = 2, 4, 2, 8
    hidden = heads * d
    feeds = {"q": _f(b, s, hidden)}
    names = ["q", "k", "v"]
    attrs = {"num_heads": heads}
    inits, outs = {}, ["y"]
    if case == "cross_4d":
        feeds.update(k=_f(b, heads, 6, d), v=_f(b, heads, 6, d))
    else:
        feeds.update(k=_f(b, s, hidden), v=_f(b, s, hidden))
    if case == "bias":
        inits["bias"] = _f(3 * hidden)
        names.append("bias")
    if case == "padding":
        mask = np.ones((b, s), np.int32)
        mask[1, 3:] = 0
        feeds["mask"] = mask
        names += ["", "mask"]
    if case == "causal_past":
        attrs["unidirectional"] = 1
        feeds.update(pk=_f(b, heads, 3, d), pv=_f(b, heads, 3, d))
        names += ["", "", "", "pk", "pv"]
        outs += ["present_k", "present_v"]
    node = helper.make_node("MultiHeadAttention", names, outs, domain=MS, **attrs)
    check_ort(contrib_model([node], feeds, outs, inits), feeds)


@pytest.mark.parametrize("case", ["plain", "mask", "causal_past"])
def test_attention(case):
    b, s, heads, d = 2, 5, 2, 8
    hidden = heads * d
    feeds = {"x": _f(b, s, 12)}
    inits = {"w": _f(12, 3 * hidden, scale=0.3), "bias": _f(3 * hidden)}
    names, outs, attrs = ["x", "w", "bias"], ["y"], {"num_heads": heads}
    if case == "mask":
        mask = np.ones((b, s), np.int32)
        mask[0, 4:] = 0
        feeds["mask"] = mask
        names.append("mask")
    if case == "causal_past":
        attrs["unidirectional"] = 1
        feeds["past"] = _f(2, b, heads, 3, d)
        names += ["", "past"]
        outs.append("present")
    node = helper.make_node("Attention", names, outs, domain=MS, **attrs)
    check_ort(contrib_model([node], feeds, outs, inits), feeds)


@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize("past_len,seq", [(0, 6), (5, 1), (4, 3)])
def test_group_query_attention(packed, past_len, seq):
    heads, kv_heads, d = 4, 2, 16
    cos, sin = _caches(64, d // 2)
    q = _f(1, seq, heads * d)
    k, v = _f(1, seq, kv_heads * d), _f(1, seq, kv_heads * d)
    feeds = {"q": np.concatenate([q, k, v], -1)} if packed else {"q": q, "k": k, "v": v}
    feeds.update(pk=_f(1, kv_heads, past_len, d), pv=_f(1, kv_heads, past_len, d),
                 seqlens=np.array([past_len + seq - 1], np.int32), total=np.array(past_len + seq, np.int32))
    names = ["q", "" if packed else "k", "" if packed else "v", "pk", "pv", "seqlens", "total", "cos", "sin"]
    node = helper.make_node("GroupQueryAttention", names, ["y", "present_k", "present_v"], domain=MS,
                            num_heads=heads, kv_num_heads=kv_heads, do_rotary=1)
    model = contrib_model([node], feeds, ["y", "present_k", "present_v"], {"cos": cos, "sin": sin})
    check_ort(model, feeds)
