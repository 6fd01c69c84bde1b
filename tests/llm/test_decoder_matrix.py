"""Bring your own model: tiny random decoders of several architectures, as torch dynamo and Hugging Face optimum
export them (fixtures from scripts/export_fixtures.py; plus transformers' eager attention and torch's opset-23
Attention/RotaryEmbedding/RMSNormalization for a few), build for generation and give onnxruntime's greedy ids
(onnxruntime runs the same ONNX with its past/present tensors through the host) for a short and a 200-token
prompt."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import webinfer
from demos.recipes.smollm2 import ort_greedy
from webinfer.llm.generate import Generator

DATA = Path(__file__).parent / "data" / "decoders"
FIXTURES = sorted(p.stem for p in DATA.glob("*.onnx"))
VOCAB = 256
NEW_TOKENS = 16
PROMPTS = {"short": 5, "long": 200}


def _prompt(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(3, VOCAB) for _ in range(n)]


@pytest.fixture(scope="module", params=FIXTURES)
def decoder(request, tmp_path_factory):
    name = request.param
    art = tmp_path_factory.mktemp(name) / f"{name}.wi"
    webinfer.build(str(DATA / f"{name}.onnx"), str(art), max_seq=PROMPTS["long"] + NEW_TOKENS)
    return name, Generator.load(str(art))


def test_matrix_covers_six_architectures_with_both_exporters():
    archs = {}
    for name in FIXTURES:
        arch, exporter = name.rsplit("-", 1)
        archs.setdefault(arch, set()).add(exporter)
    both = [a for a, ex in archs.items() if {"dynamo", "optimum"} <= ex]
    assert len(both) >= 6, archs


@pytest.mark.parametrize("length", sorted(PROMPTS))
def test_greedy_ids_match_onnxruntime(decoder, length):
    name, gen = decoder
    prompt = _prompt(PROMPTS[length], seed=len(name) + PROMPTS[length])
    want, _ = ort_greedy(DATA / f"{name}.onnx", prompt, NEW_TOKENS)
    got = [t.id for t in gen.generate(prompt, max_new_tokens=NEW_TOKENS, stop_at_eos=False)]
    assert got == want


def _logits_match_onnxruntime(model, art) -> None:
    """The last position's logits of a 200-token prefill and of a decode step equal onnxruntime's."""
    import struct

    import numpy as np
    import onnxruntime as ort

    from webinfer.runtime.session import run_sync

    gen = Generator.load(str(art))
    ref = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    inputs = {i.name for i in ref.get_inputs()}
    past = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32)
            for i in ref.get_inputs() if i.name.startswith("past_key_values.")}
    ids = _prompt(PROMPTS["long"], seed=3)
    params = struct.pack("<4f", 0.0, 0.0, 1.0, 1.0)
    step_ids, pos = ids, 0
    for step in range(2):
        ticket = gen._launch(step_ids, pos, params, 0, step, [], None, False, outputs=("logits",))
        (got,) = run_sync(gen.core.collect(ticket))
        got = np.frombuffer(got.data, np.float32).reshape(-1)[-VOCAB:]
        n = len(ids)
        feeds = {"input_ids": np.array([ids], np.int64), "attention_mask": np.ones((1, n), np.int64),
                 "position_ids": np.arange(n, dtype=np.int64)[None], **past}
        want = ref.run(["logits"], {k: v for k, v in feeds.items() if k in inputs})[0][0, -1]
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
        pos += len(step_ids)
        step_ids = [int(want.argmax())]
        ids = ids + step_ids


@pytest.mark.parametrize("target", ["software", "gpu", "gpu-subgroups"])
def test_softcap_logits_per_class(target, tmp_path):
    """Gemma 2's soft-caps (scores and final logits) through each class's attention kernels (software: registers
    only; gpu: flash prefill, split-K decode): logits, since greedy ids alone would not see a cap (tanh keeps
    the argmax)."""
    name = "gemma2-dynamo"  # transformers' eager attention with the soft-caps at 2 (scores) and 3 (logits)
    art = tmp_path / f"{name}.wi"
    webinfer.build(str(DATA / f"{name}.onnx"), str(art), max_seq=PROMPTS["long"] + NEW_TOKENS, target=target)
    _logits_match_onnxruntime(DATA / f"{name}.onnx", art)


# name -> whether q, k and v arrive as one packed projection. GPT-2 has no rotary: the attention reads
# [b, s, heads, d] without cos/sin, and its c_attn Split (optimum's read by Shape nodes too) is the packed q|k|v
# row; phi3's dynamo export writes a no-op Reshape after the attention, which hid the output's transpose, and so
# the rotary and q/k/v Slices, from the rewrite. The opset-23 exports rotate with ONNX's RotaryEmbedding (its
# half-width caches widened once for all layers); Gemma 3 transposes q and k before their RMS norm (the
# Transpose sinks below the norm to the rotary). Their q/k norms keep q, k and v three projections.
ABSORBED = {"gpt2-dynamo": True, "gpt2-optimum": True, "phi3-dynamo": True, "qwen3-opset23": False,
            "gemma3-opset23": False, "gemma3-dynamo": False, "gemma3-optimum": False}


@pytest.mark.parametrize("target", ["software", "gpu", "gpu-subgroups"])
@pytest.mark.parametrize("name", sorted(ABSORBED))
def test_head_transposes_are_absorbed_per_class(name, target, tmp_path):
    import numpy as np
    import onnx
    from onnx import numpy_helper

    # the fixtures' weights (std 0.02) leave every score near 0: scaled up, the attention depends on q and k
    model = onnx.load(str(DATA / f"{name}.onnx"))
    for t in model.graph.initializer:
        if len(t.dims) == 2 and t.data_type == onnx.TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) * np.float32(8), t.name))
    src, art, opt = tmp_path / f"{name}.onnx", tmp_path / f"{name}.wi", tmp_path / "opt.onnx"
    onnx.save(model, str(src))
    manifest = webinfer.build(str(src), str(art), max_seq=PROMPTS["long"] + NEW_TOKENS,
                              target=target, save_optimized=str(opt))
    layers = [n for n in onnx.load(str(opt)).graph.node if n.op_type == "CachedAttention"]
    attrs = [{a.name: onnx.helper.get_attribute_value(a) for a in n.attribute} for n in layers]
    assert layers and all(a["bshd"] == 1 for a in attrs)
    assert all(a.get("packed_qkv", 0) == ABSORBED[name] for a in attrs)  # q, k and v: one projection's rows
    assert all(len(n.input) == (8 if name.startswith(("phi3", "qwen3", "gemma3")) else 6) for n in layers)
    kernels = [p["op"] for p in manifest["programs"][0]["placement"] if p["dispatches"]]
    assert not set(kernels) & {"Neg", "RotaryEmbedding"}, kernels
    # gemma3-optimum's one Transpose builds the rotary table, before the layers
    assert kernels.count("Transpose") <= (name == "gemma3-optimum"), kernels
    assert name.startswith("phi3") or "Split" not in kernels, kernels
    _logits_match_onnxruntime(src, art)
