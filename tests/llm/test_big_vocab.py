"""A decoder at Qwen2.5's real vocabulary (151,936 rows, tied embedding; 2 layers, hidden 64, exported like
SmolLM2) with the binding limit lowered to 4 MiB, so its table and tied head are stored as parts
(codegen/split.py): greedy ids and logits equal onnxruntime's, in f32 and in int4 (onnxruntime on the same
weights unpacked by tests/quantref.py)."""

from __future__ import annotations

import json
import random
import struct

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tiny_llama
from quantref import unpack_reference

import webinfer
from demos.recipes.smollm2 import ort_greedy
from webinfer.graph.quantize import quantize_nk
from webinfer.llm.generate import Generator
from webinfer.options import LIMITS
from webinfer.runtime.session import run_sync

VOCAB = 151_936
LIMIT = 4 * 1024 * 1024  # the f32 table (38.9 MB) in 10 parts, its int8 words (9.7 MB) in 3


@pytest.fixture(scope="module")
def qwen_vocab_dir(tokenizer_dir, tmp_path_factory):
    """The model alone (SmolLM2's tokenizer beside it has fewer ids than this vocabulary)."""
    src = tiny_llama.tiny_llama({**tiny_llama.TINY, "vocab_size": VOCAB})
    out = tmp_path_factory.mktemp("qwen-vocab")
    (out / "model.onnx").symlink_to(src / "model.onnx")
    return out


def _prompt(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(3, VOCAB) for _ in range(n)]


def _build(model_dir, tmp_path, target: str, quantize: str | None, monkeypatch) -> Generator:
    for tier in LIMITS.values():
        monkeypatch.setitem(tier, "max_binding_bytes", LIMIT)
    out = tmp_path / "big.wi"
    webinfer.build(str(model_dir / "model.onnx"), str(out), max_seq=64, target=target, quantize=quantize)
    m = json.loads((out / "manifest.json").read_text())
    rows = [m["tensors"][t]["shape"][0] for t in m["programs"][0]["weights"] if m["tensors"][t]["shape"]]
    # the table as parts, stored once (quantized: its words and block parameters)
    assert VOCAB not in rows and sum(r for r in rows if r > 10_000) == VOCAB * (1 if quantize is None else 2), rows
    return Generator.load(str(out))


@pytest.mark.parametrize("target", ["software", "gpu"])
def test_f32_greedy_ids_match_onnxruntime(qwen_vocab_dir, tmp_path, target, monkeypatch):
    gen = _build(qwen_vocab_dir, tmp_path, target, None, monkeypatch)
    for n in (1, 9):
        prompt = _prompt(n, n)
        want, _ = ort_greedy(qwen_vocab_dir / "model.onnx", prompt, 16)
        got = [t.id for t in gen.generate(prompt, max_new_tokens=16, stop_at_eos=False)]
        assert got == want


@pytest.fixture(scope="module")
def int4_reference(qwen_vocab_dir, tmp_path_factory):
    """The model with its weights as the int4 build stores them, unpacked by tests/quantref.py: the table (and
    so the tied head) int8, every MatMul weight int4; onnxruntime runs it in f32."""
    model = onnx.load(str(qwen_vocab_dir / "model.onnx"))
    gathered = {n.input[0] for n in model.graph.node if n.op_type == "Gather"}
    multiplied = {n.input[1] for n in model.graph.node if n.op_type == "MatMul"}
    for init in model.graph.initializer:
        w = onnx.numpy_helper.to_array(init)
        if w.ndim != 2 or w.dtype != np.float32:
            continue
        if init.name in gathered:
            new = unpack_reference(*quantize_nk(w, "int8"), "int8", w.shape[1])
        elif init.name in multiplied:
            new = unpack_reference(*quantize_nk(np.ascontiguousarray(w.T), "int4"), "int4", w.shape[0]).T
        else:
            continue
        init.CopyFrom(onnx.numpy_helper.from_array(new.astype(np.float32), init.name))
    out = tmp_path_factory.mktemp("int4-ref") / "model.onnx"
    onnx.save(model, str(out))
    return out


@pytest.mark.parametrize("target", ["software", "gpu"])
def test_int4_matches_onnxruntime_on_its_weights(qwen_vocab_dir, int4_reference, tmp_path, target, monkeypatch):
    """int4 layers and the int8 table (GatherQ, the tied MatMulQ head, both as parts): greedy ids equal
    onnxruntime's on the same weights unpacked; the logits of the prefill and a decode step too."""
    gen = _build(qwen_vocab_dir, tmp_path, target, "int4", monkeypatch)
    prompt = _prompt(9, 4)
    want, _ = ort_greedy(int4_reference, prompt, 16)
    assert [t.id for t in gen.generate(prompt, max_new_tokens=16, stop_at_eos=False)] == want
    ref = ort.InferenceSession(str(int4_reference), providers=["CPUExecutionProvider"])
    past = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32)
            for i in ref.get_inputs() if i.name.startswith("past_key_values.")}
    ids = _prompt(12, 5)
    params = struct.pack("<4f", 0.0, 0.0, 1.0, 1.0)
    step_ids, pos = ids, 0
    for step in range(2):
        ticket = gen._launch(step_ids, pos, params, 0, step, [], None, False, outputs=("logits",))
        (got,) = run_sync(gen.core.collect(ticket))
        n = len(ids)
        want = ref.run(["logits"], {"input_ids": np.array([ids], np.int64), "attention_mask": np.ones((1, n), np.int64),
                                    "position_ids": np.arange(n, dtype=np.int64)[None], **past})[0][0, -1]
        got = np.frombuffer(got.data, np.float32).reshape(-1)[-VOCAB:]
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * float(np.abs(want).max()))
        pos += len(step_ids)
        step_ids = [int(want.argmax())]
        ids = ids + step_ids


@pytest.mark.parametrize("target", ["software", "gpu"])
def test_soft_capped_head_in_parts(tmp_path, target, monkeypatch):
    """Gemma 2's soft-capped head (a MatMulQ with a fused tanh epilogue) and its table over a binding lowered
    below their 64 KiB: the epilogue runs on every part; logits equal onnxruntime's."""
    from test_decoder_matrix import DATA, PROMPTS, _logits_match_onnxruntime

    for tier in LIMITS.values():
        monkeypatch.setitem(tier, "max_binding_bytes", 40_000)
    model, art = DATA / "gemma2-dynamo.onnx", tmp_path / "gemma.wi"
    webinfer.build(str(model), str(art), max_seq=PROMPTS["long"] + 16, target=target)
    m = json.loads((art / "manifest.json").read_text())
    assert [128] in [m["tensors"][t]["shape"][:1] for t in m["programs"][0]["weights"]]  # the 256-row table halved
    _logits_match_onnxruntime(model, art)
