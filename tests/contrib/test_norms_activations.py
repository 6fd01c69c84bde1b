"""Norm and GELU-family contrib ops (graph/contrib/norms.py, activations.py) against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from webinfer.backend import WebinferRep

from .ort_ref import MS, check_ort, contrib_model, ort_run

RNG = np.random.default_rng(0)


def _f(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


@pytest.mark.parametrize("domain", ["", MS])
def test_simplified_layer_norm(domain):
    x, g = _f(2, 5, 48), _f(48)
    node = helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y"], domain=domain, epsilon=1e-5, axis=-1)
    model = contrib_model([node], {"x": x}, ["y"], {"g": g})
    if domain == MS:  # onnxruntime registers it in ONNX's domain only: compare with that spelling
        ref = contrib_model([helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y"], epsilon=1e-5)],
                            {"x": x}, ["y"], {"g": g})
        np.testing.assert_allclose(WebinferRep(model).run({"x": x})[0], ort_run(ref, {"x": x})[0], rtol=1e-4,
                                   atol=1e-5)
        return
    check_ort(model, {"x": x})


@pytest.mark.parametrize("bias", [False, True])
def test_skip_simplified_layer_norm_and_sum(bias):
    x, s, g = _f(1, 7, 64), _f(1, 7, 64), _f(64)
    inits = {"g": g, **({"b": _f(64)} if bias else {})}
    node = helper.make_node("SkipSimplifiedLayerNormalization", ["x", "s", "g"] + (["b"] if bias else []),
                            ["y", "", "", "sum"], domain=MS, epsilon=1e-6)
    check_ort(contrib_model([node], {"x": x, "s": s}, ["y", "sum"], inits), {"x": x, "s": s})


@pytest.mark.parametrize("inputs", [("gamma",), ("gamma", "beta"), ("gamma", "beta", "bias")])
def test_skip_layer_norm(inputs):
    x, s = _f(2, 3, 32), _f(2, 3, 32)
    inits = {n: _f(32) for n in inputs}
    node = helper.make_node("SkipLayerNormalization", ["x", "s"] + list(inputs), ["y", "", "", "sum"], domain=MS,
                            epsilon=1e-5)
    check_ort(contrib_model([node], {"x": x, "s": s}, ["y", "sum"], inits), {"x": x, "s": s})


@pytest.mark.parametrize("segments,position_ids", [(True, False), (False, True)])
def test_embed_layer_norm(segments, position_ids):
    b, seq, hidden = 2, 6, 32
    ids = RNG.integers(0, 50, (b, seq)).astype(np.int32)
    feeds = {"ids": ids}
    mask = np.ones((b, seq), np.int32)
    mask[1, 4:] = 0
    feeds["mask"] = mask
    names = ["ids", "seg" if segments else "", "words", "pos", "segtab" if segments else "", "gamma", "beta", "mask"]
    if segments:
        feeds["seg"] = RNG.integers(0, 2, (b, seq)).astype(np.int32)
    if position_ids:
        feeds["pids"] = RNG.integers(0, 16, (b, seq)).astype(np.int32)
        names.append("pids")
    inits = {"words": _f(50, hidden), "pos": _f(16, hidden), "gamma": _f(hidden), "beta": _f(hidden)}
    if segments:
        inits["segtab"] = _f(2, hidden)
    node = helper.make_node("EmbedLayerNormalization", names, ["y", "mask_index", "emb_sum"], domain=MS, epsilon=1e-5)
    check_ort(contrib_model([node], feeds, ["y", "mask_index", "emb_sum"], inits), feeds)


@pytest.mark.parametrize("op,bias", [("FastGelu", False), ("FastGelu", True), ("BiasGelu", True), ("QuickGelu", False)])
def test_gelu_family(op, bias):
    x = _f(3, 4, 40, scale=2.0)
    inits = {"b": _f(40)} if bias else {}
    attrs = {"alpha": 1.5} if op == "QuickGelu" else {}
    node = helper.make_node(op, ["x"] + (["b"] if bias else []), ["y"], domain=MS, **attrs)
    check_ort(contrib_model([node], {"x": x}, ["y"], inits), {"x": x})


def test_gelu_after_matmul_is_an_epilogue(tmp_path):
    """A bias Gelu after a MatMul becomes the matmul's epilogue (one kernel), still matching onnxruntime."""
    import json

    import webinfer

    x, w, bias = _f(4, 32), _f(32, 48), _f(48)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("BiasGelu", ["h", "b"], ["y"], domain=MS)]
    model = contrib_model(nodes, {"x": x}, ["y"], {"w": w, "b": bias})
    model.graph.value_info.append(helper.make_tensor_value_info("h", 1, [4, 48]))  # as exporters declare them
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", 1, [4, 48]))
    check_ort(model, {"x": x})
    webinfer.build(model, str(tmp_path / "a"), target="software")
    steps = json.loads((tmp_path / "a" / "manifest.json").read_text())["programs"][0]["steps"]
    assert [s["label"].split(":")[1] for s in steps] == ["FusedGemm"]  # MatMul + bias -> Gemm, Gelu inside
