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


@pytest.mark.parametrize("target", ["gpu", "gpu-subgroups"])
def test_softcap_on_gpu_class_kernels(target, tmp_path):
    """Gemma 2's soft-capped scores through the GPU class's flash prefill and split-K decode kernels."""
    name = "gemma2-optimum"
    art = tmp_path / f"{name}.wi"
    webinfer.build(str(DATA / f"{name}.onnx"), str(art), max_seq=PROMPTS["long"] + NEW_TOKENS, target=target)
    prompt = _prompt(PROMPTS["long"], seed=3)
    want, _ = ort_greedy(DATA / f"{name}.onnx", prompt, NEW_TOKENS)
    got = [t.id for t in Generator.load(str(art)).generate(prompt, max_new_tokens=NEW_TOKENS, stop_at_eos=False)]
    assert got == want
