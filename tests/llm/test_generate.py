"""Generation through the in-place KV cache, compared token for token with onnxruntime's greedy loop on the
same ONNX (demos/recipes/smollm2.ort_greedy, which feeds past/present tensors through the host)."""

from __future__ import annotations

import json
import random
import struct
import subprocess
import sys

import pytest
from oprefs import TARGETS

import webinfer
from demos.recipes.smollm2 import ort_greedy
from webinfer.errors import WebinferError
from webinfer.llm.generate import Generator
from webinfer.options import KERNEL_CLASSES
from webinfer.runtime.session import run_sync


def _ids(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(3, 512) for _ in range(n)]


def test_manifest_keeps_cache_on_gpu(tiny_wi):
    m = json.loads((tiny_wi / "manifest.json").read_text())
    assert [o["name"] for o in m["programs"][0]["outputs"]] == ["logits", "next_token", "verify_result", "token_logprobs"]
    assert len(m["states"]) == 4  # 2 layers x (key, value)
    assert m["bounds"] == {"past_sequence": 1100, "total_sequence": 1100}
    assert not any(i["name"].startswith("past_key_values") for i in m["inputs"])
    labels = [s["label"] for s in m["programs"][0]["steps"]]
    # the software class's decode step is one attention kernel a layer: it writes the step's keys/values itself
    # (the separate write runs for prompts, beside the prefill attend)
    decode = [s for s in m["programs"][0]["steps"] if s["label"] == "cached_attention:CachedAttention"
              and (s.get("when") is None or s["when"][0] == "eq")]
    assert len(decode) == 2
    assert "sample:SampleToken" in labels


@pytest.mark.parametrize("n_prompt", [1, 7, 33])
def test_tiny_greedy_matches_onnxruntime(tiny_llama_dir, tiny_gen, n_prompt):
    prompt = _ids(n_prompt, n_prompt)
    want, _ = ort_greedy(tiny_llama_dir / "model.onnx", prompt, 24)
    got = [t.id for t in tiny_gen.generate(prompt, max_new_tokens=24, stop_at_eos=False)]
    assert got == want


@pytest.fixture(scope="module")
def tiny_gen_gpu(tiny_llama_dir, tmp_path_factory):
    """The same model built for the gpu kernel class (its attention kernel: a workgroup per row, keys split
    across invocations, chunks of 1024), run here on the software adapter."""
    out = tmp_path_factory.mktemp("tiny-gpu") / "tiny.wi"
    webinfer.build(str(tiny_llama_dir / "model.onnx"), str(out), max_seq=1100, target="gpu")
    return Generator.load(str(out)), out


@pytest.mark.parametrize("target", ["software", "gpu"])
def test_long_prefill_matches_onnxruntime(tiny_llama_dir, tiny_wi, tiny_gen, tiny_gen_gpu, target):
    """1040 prompt tokens then decode, with both classes' attention kernels: the registers-only one (software)
    and the workgroup one (gpu), which streams keys in chunks of 1024 with an online softmax across chunks."""
    gen, art = (tiny_gen, tiny_wi) if target == "software" else tiny_gen_gpu
    shaders = " ".join(p.read_text() for p in (art / "shaders").glob("*.wgsl"))
    assert ("var<workgroup> sc:" in shaders) == (target == "gpu")
    prompt = _ids(1040, 5)
    want, _ = ort_greedy(tiny_llama_dir / "model.onnx", prompt, 4)
    got = [t.id for t in gen.generate(prompt, max_new_tokens=4, stop_at_eos=False)]
    assert got == want


_GENS: dict = {}


def _gen_for(tiny_llama_dir, tmp_path_factory, target: str, quantize: str | None = None) -> Generator:
    if (target, quantize) not in _GENS:
        out = tmp_path_factory.mktemp(f"tiny-{target}") / "tiny.wi"
        webinfer.build(str(tiny_llama_dir / "model.onnx"), str(out), max_seq=600, target=target, quantize=quantize)
        _GENS[target, quantize] = Generator.load(str(out))
    return _GENS[target, quantize]


@pytest.mark.parametrize("target,quantize", [(t, None) for t in TARGETS] + [("software", "int8"),
                                                                          ("software-subgroups", "int8"),
                                                                          ("gpu-dp4a", "int8")])
def test_logits_match_onnxruntime_per_class(tiny_llama_dir, tmp_path_factory, target, quantize):
    """Each class's attention kernels (software: registers only; gpu: flash prefill with K/V tiles in workgroup
    memory, split-K decode blocks of 256 keys then a merge; gpu-subgroups: the same with subgroup reductions)
    give onnxruntime's last-position logits, prefill (300 tokens: many tiles and query blocks) then decode
    steps across a block boundary. onnxruntime runs the whole prefix each time, without a cache. int8 weights
    (and gpu-dp4a's int8 activations in the decode GEMVs, with their fused epilogues; software-subgroups' x
    blocks broadcast in them) at a looser bound."""
    gen = _gen_for(tiny_llama_dir, tmp_path_factory, target, quantize)
    rel = 1e-4 if not KERNEL_CLASSES[target].use_f16 else 1e-2  # f16: q.k products and the KV cache in f16
    rel = 0.15 if quantize else rel  # int8 on this random tiny model: software ~5e-2 of peak, dp4a ~9e-2
    _assert_logits_match(gen, tiny_llama_dir / "model.onnx", rel)


def test_shared_kv_rows_match_onnxruntime(tmp_path):
    """software-subgroups' prefill kernel shares each K/V row among a subgroup's invocations on one head (head
    dims that are multiples of 32): a tiny Llama with 32-wide heads, 300 prompt tokens in blocks of 4 rows, 75
    blocks a head, so some subgroups straddle two heads and take the plain loop; then decode steps."""
    from tiny_llama import TINY, tiny_llama

    model = tiny_llama({**TINY, "hidden_size": 128, "intermediate_size": 256}) / "model.onnx"
    webinfer.build(str(model), str(tmp_path / "wide.wi"), max_seq=600, target="software-subgroups")
    _assert_logits_match(Generator.load(str(tmp_path / "wide.wi")), model, 1e-4)


@pytest.mark.parametrize("target", ["software", "gpu"])
def test_wide_heads_past_the_software_loop_limit(tmp_path, target):
    """512-wide heads after a 300-token prompt: each key costs the attention kernels' head-size loops, and
    llvmpipe ends every loop of an invocation once they have run 65535 iterations together (Mesa's
    LP_MAX_TGSI_LOOP_ITERATIONS), silently: with those loops not unrolled, rows past ~250 keys kept their
    first vec4 only (docs/notes.md, stop 28). The software class's decode step also merges its invocations'
    partial softmaxes in workgroup memory (d + 4 floats each): 4 invocations, not 8, stay within 16 KiB.
    At 300 tokens onnxruntime's own fp32 logits are 1e-4 of the peak from float64 torch's, hence 3e-4."""
    from tiny_llama import TINY, tiny_llama

    model = tiny_llama({**TINY, "hidden_size": 1024, "num_attention_heads": 2, "num_key_value_heads": 1}) / "model.onnx"
    webinfer.build(str(model), str(tmp_path / "wide.wi"), max_seq=600, target=target)
    _assert_logits_match(Generator.load(str(tmp_path / "wide.wi")), model, 3e-4)


def _assert_logits_match(gen: Generator, model, rel: float, prompt: int = 300) -> None:
    """``prompt`` tokens then 2 decode steps: each step's last-position logits within ``rel`` of the largest
    of onnxruntime's, which runs the whole prefix each time, without a cache."""
    import numpy as np
    import onnxruntime as ort

    ref = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    past = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32)
            for i in ref.get_inputs() if i.name.startswith("past_key_values.")}
    ids = _ids(prompt, 11)
    params = struct.pack("<4f", 0.0, 0.0, 1.0, 1.0)
    step_ids, pos = ids, 0
    for step in range(3):
        ticket = gen._launch(step_ids, pos, params, 0, step, [], None, False, outputs=("logits",))
        (got,) = run_sync(gen.core.collect(ticket))
        n = len(ids)
        want = ref.run(["logits"], {"input_ids": np.array([ids], np.int64), "attention_mask": np.ones((1, n), np.int64),
                                    "position_ids": np.arange(n, dtype=np.int64)[None], **past})[0][0, -1]
        got = np.frombuffer(got.data, np.float32).reshape(-1)[-want.size:]
        err, peak = float(np.abs(got - want).max()), float(np.abs(want).max())
        assert err <= rel * peak, f"step {step}: max abs err {err:.3g} > {rel} x peak {peak:.3g}"
        pos += len(step_ids)
        step_ids = [int(want.argmax())]
        ids = ids + step_ids


def test_past_max_seq_fails_cleanly(tiny_llama_dir, tmp_path):
    art = tmp_path / "short.wi"
    webinfer.build(str(tiny_llama_dir / "model.onnx"), str(art), max_seq=16)
    gen = Generator.load(str(art))
    with pytest.raises(WebinferError, match="exceeds the KV cache of 16 positions"):
        next(gen.generate(_ids(10, 1), max_new_tokens=7))
    assert len([t for t in gen.generate(_ids(10, 1), max_new_tokens=6, stop_at_eos=False)]) == 6
    proc = subprocess.run([sys.executable, "-m", "webinfer.cli", "generate", str(art), "--prompt", "hello " * 20],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "exceeds the KV cache" in proc.stderr, proc.stderr


def test_cancel_leaves_session_usable(tiny_llama_dir, tiny_gen):
    prompt = _ids(9, 2)
    seen = []
    for tok in tiny_gen.generate(prompt, max_new_tokens=20, stop_at_eos=False):
        seen.append(tok.id)
        if len(seen) == 3:
            tiny_gen.cancel()
    assert len(seen) == 3 and tiny_gen.stats["cancelled"]
    want, _ = ort_greedy(tiny_llama_dir / "model.onnx", prompt, 12)
    assert [t.id for t in tiny_gen.generate(prompt, max_new_tokens=12, stop_at_eos=False)] == want


def test_sampling_is_seeded_and_varies(tiny_gen):
    prompt = _ids(5, 3)
    opts = {"max_new_tokens": 12, "temperature": 1.5, "top_k": 50, "top_p": 0.95, "stop_at_eos": False}
    a = [t.id for t in tiny_gen.generate(prompt, seed=1, **opts)]
    b = [t.id for t in tiny_gen.generate(prompt, seed=1, **opts)]
    c = [t.id for t in tiny_gen.generate(prompt, seed=2, **opts)]
    assert a == b and a != c


def test_bad_options_are_one_line_errors(tiny_gen):
    for opts in ({"temperature": -1}, {"top_p": 0}, {"top_k": -2}, {"max_new_tokens": 0}):
        with pytest.raises(WebinferError):
            next(tiny_gen.generate([5, 6], **opts))


def test_generate_cli_json(tiny_wi, tokenizer_dir):
    from tokenizers import Tokenizer

    # The tiny model has 512 of SmolLM2's 49152 tokens: a prompt whose ids fit, and one whose ids do not
    # (refused in one line, as onnxruntime refuses out-of-range indices, instead of generating from garbage).
    cli = [sys.executable, "-m", "webinfer.cli", "generate", str(tiny_wi), "--max-new-tokens", "5", "--json"]
    proc = subprocess.run(cli + ["--prompt", "The weather today"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "index 3947 is out of range for a table of 512 rows" in proc.stderr
    proc = subprocess.run(cli + ["--prompt", "in the"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    ref = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json")).encode("in the").ids
    assert out["prompt_ids"] == ref
    assert 1 <= len(out["token_ids"]) <= 5
    assert out["decode_tok_s"] is None or out["decode_tok_s"] > 0
    assert set(out) == {"prompt_ids", "token_ids", "text", "prefill_tok_s", "decode_tok_s", "ttft_s"}


def test_repetition_penalty_matches_reference(tiny_llama_dir, tiny_gen):
    """With a penalty each step needs the host's history (no overlapped steps): still ORT's tokens. The random
    tiny model never repeats on its own, so a penalty below 1 (which favours seen tokens) is what shows."""
    prompt = _ids(6, 4)
    want, _ = ort_greedy(tiny_llama_dir / "model.onnx", prompt, 16, repetition_penalty=0.3)
    assert want != ort_greedy(tiny_llama_dir / "model.onnx", prompt, 16)[0]
    got = [t.id for t in tiny_gen.generate(prompt, max_new_tokens=16, repetition_penalty=0.3, stop_at_eos=False)]
    assert got == want


def test_bench_generator_loop_prefills_the_whole_prompt(tiny_llama_dir, tiny_gen, monkeypatch):
    """webinfer bench's generation loop (benchmarks/runner.time_generator) runs one prompt several times; each
    run must prefill all of it (the generator's prefix cache would otherwise leave one token to time) and the
    greedy ids must be onnxruntime's."""
    import os

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from benchmarks.runner import time_generator

    prompt = _ids(40, seed=7)
    job = {"warmup": 1, "runs": 3, "budget_s": 60,
           "llm": {"prompt": prompt, "decode": [0] * 6, "decode_passes": 1}}
    reused, agenerate = [], tiny_gen.agenerate

    async def recording(*args, **kwargs):  # what each of the loop's generations reused from the cache
        async for token in agenerate(*args, **kwargs):
            yield token
        reused.append(tiny_gen.stats["reused_tokens"])

    monkeypatch.setattr(tiny_gen, "agenerate", recording)
    result = run_sync(time_generator(tiny_gen, job))  # (an event loop may already run: pytest-playwright)
    assert len(result["prefill_ms"]) == 3 and reused[-3:] == [0, 0, 0], reused  # after the warm-up: none
    want, _ = ort_greedy(tiny_llama_dir / "model.onnx", prompt, 7)
    assert result["outputs"]["tokens"] == want
