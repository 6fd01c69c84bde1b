"""Speculative decoding (llm/speculative.py): greedy ids equal plain decoding's with prompt-lookup drafts and
with draft models (the target itself, and another tiny Llama of the same vocabulary), the verification
step's per-row logits equal onnxruntime's, and the refusals are one line. The sampling rule is checked
against numpy in tests/codegen/test_verify_draft.py."""

from __future__ import annotations

import json
import random
import struct
import subprocess
import sys

import numpy as np
import pytest

import webinfer
from webinfer.errors import WebinferError
from webinfer.llm.generate import Generator
from webinfer.llm.speculative import NgramDrafter
from webinfer.runtime.session import run_sync

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def _prompts(n: int, vocab: int = 512, seed: int = 5) -> list[list[int]]:
    """Random ids; every other prompt repeats a stretch of itself (text quoted back), so drafts get accepted."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        base = [rng.randrange(3, vocab) for _ in range(rng.randrange(6, 40))]
        if i % 2:
            cut = rng.randrange(1, len(base))
            base = base + base[:cut] + base[cut // 2:]
        out.append(base)
    return out


def _plain(gen: Generator, ids, n: int) -> list[int]:
    gen.reset()
    return [t.id for t in gen.generate(ids, max_new_tokens=n, stop_at_eos=False)]


def _spec(gen: Generator, ids, n: int, speculative, k: int = 4) -> list[int]:
    gen.reset()
    return [t.id for t in gen.generate(ids, max_new_tokens=n, stop_at_eos=False, speculative=speculative,
                                       draft_tokens=k)]


def test_ngram_greedy_equals_plain_on_20_prompts(tiny_gen):
    from webinfer.llm.speculative import NgramDrafter

    drafted = accepted = 0
    for i, ids in enumerate(_prompts(20)):
        want = _plain(tiny_gen, ids, 40)
        # half the prompts with the default (adaptive) drafter, half with one drafting on every match of 1-2
        # tokens (the tiny random model seldom continues as its prompt did: drafts get both accepted and rejected)
        drafter = "ngram" if i % 2 else NgramDrafter(3 + i % 3, adaptive=False, min_ngram=1 + i % 4 // 2)
        got = _spec(tiny_gen, ids, 40, drafter, k=3 + i % 3)
        assert got == want, f"prompt {i}"
        st = tiny_gen.stats["speculative"]
        drafted += st["drafted"]
        accepted += st["accepted"]
    # the check means something only if drafts were both accepted and rejected (rolled back)
    assert 0 < accepted < drafted


def test_cache_reuse_and_rollback_across_turns(tiny_gen):
    """A second generation continuing the first reuses the cache the speculative one left (rejected rows
    included, past the position counter): the ids equal a plain generation of the whole prefix."""
    ids = _prompts(2, seed=9)[1]
    first = _spec(tiny_gen, ids, 20, "ngram")
    more = ids + first + [7, 8, 9]
    got = [t.id for t in tiny_gen.generate(more, max_new_tokens=20, stop_at_eos=False, speculative="ngram")]
    assert tiny_gen.stats["reused_tokens"] == len(ids) + len(first) - 1
    assert got == _plain(tiny_gen, more, 20)


@pytest.fixture(scope="module")
def other_tiny_gen(tmp_path_factory):
    """Another tiny Llama of the same vocabulary (wider, other weights): a draft that is often wrong."""
    from tiny_llama import TINY, tiny_llama

    model = tiny_llama({**TINY, "hidden_size": 128, "intermediate_size": 256}) / "model.onnx"
    out = tmp_path_factory.mktemp("draft") / "draft.wi"
    webinfer.build(str(model), str(out), max_seq=600, target="software")
    return Generator.load(str(out))


def test_draft_models_greedy_equal_plain(tiny_gen, tiny_wi, other_tiny_gen):
    itself = Generator.load(str(tiny_wi))  # the target as its own draft: every draft token is accepted
    for ids in _prompts(4, seed=3):
        want = _plain(tiny_gen, ids, 30)
        assert _spec(tiny_gen, ids, 30, itself) == want
        assert tiny_gen.stats["speculative"]["acceptance_rate"] == 1.0
        assert _spec(tiny_gen, ids, 30, other_tiny_gen, k=3) == want
        assert _spec(other_tiny_gen, ids, 30, tiny_gen, k=5) == _plain(other_tiny_gen, ids, 30)


def test_verification_rows_match_onnxruntime(tiny_llama_dir, tiny_gen):
    """A verification step's logits (one row per fed position, after a cached prefix) against onnxruntime
    running each whole prefix without a cache."""
    import onnxruntime as ort

    ref = ort.InferenceSession(str(tiny_llama_dir / "model.onnx"), providers=["CPUExecutionProvider"])
    past = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32)
            for i in ref.get_inputs() if i.name.startswith("past_key_values.")}
    ids = _prompts(1, seed=2)[0] + [5, 6, 7, 8, 9]
    prefix, fed = len(ids) - 5, ids[-5:]
    params = struct.pack("<4f", 0.0, 0.0, 1.0, 1.0)
    run_sync(tiny_gen.core.collect(tiny_gen._launch(ids[:prefix], 0, params, 0, 0, [], None, False)))
    ticket = tiny_gen._launch(fed, prefix, params, 0, 1, [], None, False, outputs=("logits", "verify_result"),
                              verify=fed[1:] + [-1])
    logits, verdict = run_sync(tiny_gen.core.collect(ticket))
    got = np.frombuffer(logits.data, np.float32).reshape(5, -1)
    for r in range(5):
        n = prefix + r + 1
        want = ref.run(["logits"], {"input_ids": np.array([ids[:n]], np.int64),
                                    "attention_mask": np.ones((1, n), np.int64),
                                    "position_ids": np.arange(n, dtype=np.int64)[None], **past})[0][0, -1]
        assert np.abs(got[r] - want).max() <= 3e-4 * np.abs(want).max(), f"row {r}"
    tiny_gen.reset()


@pytest.mark.parametrize("target", ["software", "software-subgroups"])
def test_quantized_greedy_equals_plain_on_20_prompts(tiny_llama_dir, tmp_path, target):
    """int4/int8 weights: verification steps of 8 rows run the few-rows matmul kernels (each weight dequantized
    once for every row: codegen/kernels/quant_rows.py, checked against numpy in tests/codegen/
    test_quant_matmul.py), of 4 rows too; prompt-lookup decoding gives plain decoding's ids on 20 prompts."""
    art = tmp_path / "int4.wi"
    webinfer.build(str(tiny_llama_dir / "model.onnx"), str(art), max_seq=256, quantize="int4", target=target)
    gen = Generator.load(str(art))
    drafted = accepted = 0
    for i, ids in enumerate(_prompts(20, seed=9)):
        k = 7 if i % 4 else 3
        drafter = "ngram" if i % 2 else NgramDrafter(k, adaptive=False, min_ngram=1 + i % 4 // 2)
        got = _spec(gen, ids, 30, drafter, k=k)
        drafted += gen.stats["speculative"]["drafted"]
        accepted += gen.stats["speculative"]["accepted"]
        assert got == _plain(gen, ids, 30), f"prompt {i}"
    assert 0 < accepted < drafted


def test_speculative_sampling_is_seeded_and_valid(tiny_gen):
    ids = _prompts(2, seed=4)[1]
    a = _spec_sampled(tiny_gen, ids, seed=3)
    assert a == _spec_sampled(tiny_gen, ids, seed=3)
    assert a != _spec_sampled(tiny_gen, ids, seed=4)
    assert all(0 <= t < 512 for t in a)


def _spec_sampled(gen, ids, seed):
    gen.reset()
    return [t.id for t in gen.generate(ids, max_new_tokens=30, stop_at_eos=False, temperature=1.0, top_k=50,
                                       seed=seed, speculative="ngram")]


def test_refusals_are_one_line(tiny_gen, other_tiny_gen, tiny_chat_gen):
    ids = [5, 6, 7]
    for opts, msg in [({"speculative": "ngram", "repetition_penalty": 1.2}, "repetition penalty"),
                      ({"speculative": "bigram"}, "speculative must be"),
                      ({"speculative": "ngram", "draft_tokens": 0}, "draft_tokens"),
                      ({"speculative": tiny_chat_gen}, "vocabulary")]:
        with pytest.raises(WebinferError, match=msg):
            list(tiny_gen.generate(ids, max_new_tokens=4, **opts))
    # logit_bias / logprobs (set per request by the OpenAI-shaped API, llm/logit_options.py): the verification
    # rows apply no bias and report no logprobs, so the combination is refused rather than silently ignored
    for bias, k in [({7: 50.0}, None), (None, 2)]:
        tiny_gen.logit_options.configure(bias, k)
        try:
            with pytest.raises(WebinferError, match="logit_bias or logprobs") as err:
                list(tiny_gen.generate(ids, max_new_tokens=4, speculative="ngram"))
            assert "\n" not in str(err.value)
        finally:
            tiny_gen.logit_options.reset()
    # the OpenAI-shaped API (Python, HTTP, the page), where logit_bias comes from, offers no speculative decoding
    from webinfer.llm.api_request import parse_chat_request

    with pytest.raises(WebinferError, match="unsupported parameter.*speculative"):
        parse_chat_request({"messages": [{"role": "user", "content": "x"}], "speculative": "ngram",
                            "logit_bias": {"7": 50}})
    # and with the bias taken away again, speculative decoding runs
    assert len(list(tiny_gen.generate(ids, max_new_tokens=4, stop_at_eos=False, speculative="ngram"))) == 4


def test_ngram_drafter_proposes_the_latest_longest_continuation():
    from webinfer.llm.speculative import NgramDrafter

    d = NgramDrafter(3, min_ngram=2)
    assert run_sync(d.propose([1, 2, 3, 9, 1, 2, 4, 5, 6, 1, 2])) == [4, 5, 6]  # latest match of [1, 2]
    # the longest suffix match wins over a later shorter one
    assert run_sync(d.propose([5, 1, 2, 7, 8, 0, 1, 2, 6, 6, 5, 1, 2])) == [7, 8, 0]
    assert run_sync(d.propose([7, 8, 9, 7, 8])) == [9, 7, 8]
    assert run_sync(d.propose([1, 2, 3, 1])) == []  # matches of one token draft nothing here
    assert run_sync(NgramDrafter(3).propose([7, 8, 9, 7, 8])) == []  # nor of two by default
    one = NgramDrafter(3, min_ngram=1)
    assert run_sync(one.propose([1, 2, 3, 1])) == [2, 3, 1]
    assert run_sync(one.propose([5, 6, 5])) == [6, 5, 5]  # a short continuation repeats its last token
    assert run_sync(one.propose([1, 2, 3])) == []


def test_ngram_drafter_adapts_to_what_drafts_gain():
    from webinfer.llm.lookup import PROBE_EVERY, NgramDrafter

    d = NgramDrafter(7, min_ngram=2)
    d.costs = {7: 2.0, 3: 2.0}  # a verification costs 2 plain steps (as measured by the loop), whatever its rows
    d.observe(0, 7)  # a loss: no short drafts, they would cost as much
    assert d.length == 7
    d = NgramDrafter(7, min_ngram=2)
    d.costs = {7: 2.0, 3: 1.5}  # a short draft's step is cheaper
    # idle (chain the next step) when no match of `need` tokens can end with the next token
    assert d.idle([1, 2, 3]) and not d.idle([1, 2, 1])
    d.observe(0, 7)  # a loss (1 token for 2 steps): a step's pause, a longer match needed, short drafts
    assert (d.skip, d.need, d.length) == (1, 3, 3)
    assert d.idle([1, 2, 1, 2]) and d.skip == 0  # the pause
    d.hit, d.pending = 1.0, False  # (matches have been extended lately)
    assert d.idle([1, 2, 1]) and not d.idle([1, 2, 1, 2])  # [2, 1] never occurred: no 3-token match can end next
    d.observe(0, 3)
    assert (d.skip, d.need) == (2, 4)
    assert run_sync(d.propose([1, 2, 3, 1, 2, 3])) == [] and run_sync(d.propose([1, 2, 3, 1, 2, 3])) == []
    assert run_sync(d.propose([1, 2, 3, 1, 2, 3])) == []  # a 3-token match, 4 needed
    assert run_sync(d.propose([9, 1, 2, 3, 5, 9, 1, 2, 3])) == [5, 9, 1]  # 4 tokens: short draft
    d.observe(3, 3)  # a gain, the whole draft: back to long drafts, a shorter match
    assert (d.skip, d.backoff, d.need, d.length) == (0, 0, 3, 7)
    # a possible match that the next token rarely extends: the step is chained all the same
    d = NgramDrafter(7, min_ngram=2)
    for _ in range(3):
        assert not d.idle([4, 5, 6, 4]) or d.hit < 0.5
        d.idle([4, 5, 6, 4, 9])  # the token that came did not extend [4] -> [4, 5]
    assert d.hit < 0.5 and d.idle([4, 5, 6, 4])
    # where no draft can pay (7 drafts cost 9 plain steps), none until a probe is due
    d = NgramDrafter(7)
    d.observe(7, 7, cost=30.0)  # a shape's first verification (plan, pipelines) is no cost sample
    assert d.costs == {} and not d.hopeless()
    d.observe(7, 7, cost=9.0)
    history = [1, 2, 3, 4, 5, 1, 2, 3, 4]  # (that loss raised the match needed to 4 tokens)
    assert d.hopeless() and d.idle(history) and run_sync(d.propose(history)) == []
    d.since = PROBE_EVERY
    assert not d.hopeless() and run_sync(d.propose(history)) == [5, 1, 2, 3, 4, 4, 4]
    d.observe(7, 7, cost=2.0)  # the machine got faster: 0.7 * 9 + 0.3 * 2 = 6.9 < 8
    assert not d.hopeless()


def test_generate_cli_speculative_json(tiny_wi, tmp_path):
    cmd = [sys.executable, "-m", "webinfer.cli", "generate", str(tiny_wi), "--prompt", "in the in the in the",
           "--max-new-tokens", "12", "--json"]
    plain = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    spec = subprocess.run(cmd + ["--speculative", "ngram", "--draft-tokens", "3"], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert plain.returncode == 0 and spec.returncode == 0, spec.stderr
    a, b = json.loads(plain.stdout), json.loads(spec.stdout)
    assert a["token_ids"] == b["token_ids"]
    sp = b["speculative"]
    assert sp["acceptance_rate"] == (sp["accepted"] / sp["drafted"] if sp["drafted"] else None)
    bad = subprocess.run(cmd + ["--speculative", str(tmp_path / "missing.wi")], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert bad.returncode != 0 and bad.stderr.startswith("webinfer: error:") and "Traceback" not in bad.stderr


SMOLLM_PROMPTS = [
    "Repeat this sentence exactly: The quick brown fox jumps over the lazy dog near the river bank.",
    "Read the passage and quote the sentence about size.\n\nThe Amazon basin covers seven million square "
    "kilometres. Most of the forest is in Brazil.",
    "What is the capital of France?",
]


@pytest.mark.slow
def test_smollm_greedy_speculative_equals_plain(smollm_dir, tmp_path_factory):
    """SmolLM2-135M-Instruct (int4, as served): prompt-lookup decoding gives plain greedy decoding's ids."""
    art = tmp_path_factory.mktemp("smollm-spec") / "smollm.wi"
    webinfer.build(str(smollm_dir / "model.onnx"), str(art), max_seq=384, quantize="int4", target="software")
    gen = Generator.load(str(art))
    accepted = 0
    for prompt, k in zip(SMOLLM_PROMPTS, (4, 7, 4)):
        ids = gen.chat_ids([{"role": "user", "content": prompt}])
        got = _spec(gen, ids, 40, "ngram", k=k)
        accepted += gen.stats["speculative"]["accepted"]
        assert got == _plain(gen, ids, 40), prompt
    assert accepted > 0


def test_artifacts_without_the_verify_head_still_generate(tiny_llama_dir, tiny_gen, tmp_path, monkeypatch):
    """An artifact built before the verification head (last-position head, no verify_ids input): plain
    generation gives the same ids; speculative decoding is refused in one line."""
    from webinfer.graph import llm
    from webinfer.graph.llm import head

    real = llm.generation_rewrites

    def before(model, max_seq):
        rewrites = real(model, max_seq)
        if rewrites:
            rewrites["last_token_logits"] = head.last_token_logits
            rewrites.pop("verify_draft")
        return rewrites

    monkeypatch.setattr(llm, "generation_rewrites", before)
    webinfer.build(str(tiny_llama_dir / "model.onnx"), str(tmp_path / "old.wi"), max_seq=300, target="software")
    old = Generator.load(str(tmp_path / "old.wi"))
    assert "verify_ids" not in old._inputs
    ids = _prompts(1, seed=8)[0]
    assert _plain(old, ids, 12) == _plain(tiny_gen, ids, 12)
    with pytest.raises(WebinferError, match="no verification head"):
        _spec(old, ids, 12, "ngram")
