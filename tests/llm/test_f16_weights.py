"""``--quantize f16``: MatMul weights and the embedding table stored as float16 words (half the bytes), read as
f32 by every kernel class (unpack2x16float, no shader-f16). The real-shape stand-in of issue 37's matrix: a
decoder at Qwen2.5's vocabulary (151,936 rows, tied; 2 layers) with the binding limit lowered so the f16 table
and its tied head are row parts; greedy ids and logits equal onnxruntime's on the same weights rounded to
float16 by numpy, and the GPU holds the f16 words only (the session's allocated bytes, as inspect counts)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from quantref import f16_weight_names
from test_big_vocab import VOCAB, _prompt, qwen_vocab_dir  # noqa: F401  (the module fixture)

import webinfer
from demos.recipes.smollm2 import ort_greedy
from tests.runtime.test_memory_figures import CountingDevice
from webinfer.artifact import Artifact, program_view
from webinfer.graph.quantize import dequantize_nk, quantize_nk
from webinfer.llm.generate import Generator
from webinfer.options import LIMITS
from webinfer.report import build_report, gpu_memory
from webinfer.runtime.session import run_sync

LIMIT = 4 * 1024 * 1024  # the f16 table (19.4 MB) in 5 parts


def f16_reference(src, out) -> str:
    """The model with those weights rounded to float16 (numpy, nearest-even) and back; onnxruntime runs it."""
    model = onnx.load(str(src))
    names = f16_weight_names(model)
    for init in model.graph.initializer:
        if init.name in names:
            w = onnx.numpy_helper.to_array(init).astype(np.float16).astype(np.float32)
            init.CopyFrom(onnx.numpy_helper.from_array(w, init.name))
    onnx.save(model, str(out))
    return str(out)


def test_f16_words_round_trip():
    """Value k of a row in the low half of word k/2, rows padded to whole vec4s; decoded = numpy's f16."""
    w = np.random.default_rng(0).standard_normal((3, 37)).astype(np.float32) * 3
    w[0, 0], w[1, 1] = 70000.0, 1e-6  # overflow to inf and an f16 subnormal, as numpy rounds them
    words, params = quantize_nk(w, "f16")
    assert params is None and words.dtype == np.uint32 and words.shape == (3, 20)
    halves = np.stack([words & 0xFFFF, words >> 16], axis=-1).reshape(3, 40).astype(np.uint16).view(np.float16)
    with np.errstate(over="ignore"):
        want = w.astype(np.float16)
    np.testing.assert_array_equal(halves[:, :37], want)
    np.testing.assert_array_equal(halves[:, 37:], 0)
    np.testing.assert_array_equal(dequantize_nk(words, None, "f16", 37), want.astype(np.float32))


@pytest.fixture(scope="module")
def f16_model(qwen_vocab_dir, tmp_path_factory):  # noqa: F811
    return f16_reference(qwen_vocab_dir / "model.onnx", tmp_path_factory.mktemp("f16-ref") / "model.onnx")


def _build(model_dir, tmp_path, target, monkeypatch) -> str:
    for tier in LIMITS.values():
        monkeypatch.setitem(tier, "max_binding_bytes", LIMIT)
    out = tmp_path / "f16.wi"
    webinfer.build(str(model_dir / "model.onnx"), str(out), max_seq=64, target=target, quantize="f16")
    return str(out)


@pytest.mark.parametrize("target", ["software", "gpu"])
def test_f16_greedy_ids_and_logits_match_onnxruntime(qwen_vocab_dir, f16_model, tmp_path, target,  # noqa: F811
                                                     monkeypatch):
    art = _build(qwen_vocab_dir, tmp_path, target, monkeypatch)
    m = json.loads((Path(art) / "manifest.json").read_text())
    shapes = [m["tensors"][t]["shape"] for t in m["programs"][0]["weights"]]
    # the table (hidden 64 -> 32 words a row) as parts, stored once for the Gather and the tied head
    assert VOCAB not in [s[0] for s in shapes if s] and sum(s[0] for s in shapes if s and s[0] > 10_000) == VOCAB
    assert all(s[1] == 32 for s in shapes if s and s[0] > 10_000), shapes
    gen = Generator.load(art)
    prompt = _prompt(9, 4)
    want, _ = ort_greedy(f16_model, prompt, 16)
    assert [t.id for t in gen.generate(prompt, max_new_tokens=16, stop_at_eos=False)] == want
    ref = ort.InferenceSession(f16_model, providers=["CPUExecutionProvider"])
    past = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32)
            for i in ref.get_inputs() if i.name.startswith("past_key_values.")}
    ids = _prompt(12, 5)
    ticket = gen._launch(ids, 0, struct.pack("<4f", 0.0, 0.0, 1.0, 1.0), 0, 0, [], None, False, outputs=("logits",))
    (got,) = run_sync(gen.core.collect(ticket))
    n = len(ids)
    want = ref.run(["logits"], {"input_ids": np.array([ids], np.int64), "attention_mask": np.ones((1, n), np.int64),
                                "position_ids": np.arange(n, dtype=np.int64)[None], **past})[0][0, -1]
    got = np.frombuffer(got.data, np.float32).reshape(-1)[-VOCAB:]
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * float(np.abs(want).max()))


def test_f16_weights_stay_packed_on_the_gpu(qwen_vocab_dir, tmp_path):  # noqa: F811
    """The session allocates what inspect says (within 5 %), and its weights are the f16 words: the f32
    build's less half of every f16 weight's bytes, no f32 copy of any weight beside them."""
    sizes = {}
    for q in (None, "f16"):
        art = str(tmp_path / f"{q}.wi")
        webinfer.build(str(qwen_vocab_dir / "model.onnx"), art, max_seq=64, target="software", quantize=q)
        device = CountingDevice()
        gen = Generator.load(art, device=device)
        list(gen.generate([5], max_new_tokens=1, stop_at_eos=False))
        report = build_report(program_view(Artifact.load(art).manifest, gen.core.choice.index), {"sequence": 1})
        want = gpu_memory(report)
        assert abs(device.storage_bytes - want) <= 0.05 * want, (q, device.storage_bytes, want)
        sizes[q] = report["weight_bytes"], device.storage_bytes - report["state_bytes"] - report["peak_bytes"]
    f32_weights, f16_weights = sizes[None][0], sizes["f16"][0]
    model = onnx.load(str(qwen_vocab_dir / "model.onnx"))
    halved = sum(4 * int(np.prod(i.dims)) for i in model.graph.initializer if i.name in f16_weight_names(model))
    assert abs(f16_weights - (f32_weights - halved // 2)) <= 4096, (f32_weights, f16_weights, halved)
    assert sizes["f16"][1] <= f16_weights * 1.05 + 65536, sizes


def test_tiny_llama_f16_equals_onnxruntime_on_rounded_weights(tiny_llama_dir, tmp_path):
    """The default (portable) build, one artifact for every adapter, on the tiny Llama."""
    ref = f16_reference(tiny_llama_dir / "model.onnx", tmp_path / "ref.onnx")
    art = str(tmp_path / "tiny.wi")
    webinfer.build(str(tiny_llama_dir / "model.onnx"), art, max_seq=64, quantize="f16")
    prompt = [1, 7, 300, 42, 9]
    want, _ = ort_greedy(ref, prompt, 12)
    assert [t.id for t in Generator.load(art).generate(prompt, max_new_tokens=12, stop_at_eos=False)] == want
