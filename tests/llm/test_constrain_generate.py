"""Constrained generation on the GPU with the tiny random Llama (SmolLM2's whole vocabulary): a random model
writes text that matches only because the sampler masks the disallowed tokens, and each step reads back the
4-byte sampled id, never the logits."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tempfile

import pytest

from webinfer.llm.constrain import grammar_constraint, json_object_constraint, regex_constraint

PATTERN = r"(yes|no), [a-z]{2,8} [0-9]{1,3}\."
ARITH = 'root ::= term (("+" | "*") term)*\nterm ::= [1-9] [0-9]? | "(" root ")"\n'


def _sample_opts(seed: int) -> dict:
    return {"temperature": 0.0} if seed == 0 else {"temperature": 1.0, "top_p": 0.95, "seed": seed}


@pytest.fixture
def reads(tiny_chat_gen, monkeypatch):
    """The byte counts of every read from the device."""
    device = tiny_chat_gen.core.device
    seen: list[int] = []
    real = device.read

    async def read(buf, nbytes, *args, **kwargs):
        seen.append(nbytes)
        return await real(buf, nbytes, *args, **kwargs)

    monkeypatch.setattr(device, "read", read)
    return seen


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_regex_output_matches_and_only_token_ids_are_read_back(tiny_chat_gen, reads, seed):
    c = regex_constraint(PATTERN, tiny_chat_gen.tokenizer)
    tokens = list(tiny_chat_gen.generate("Answer:", constraint=c, max_new_tokens=40, **_sample_opts(seed)))
    text = tiny_chat_gen.stats["text"]
    assert re.fullmatch(PATTERN, text), text
    assert tokens[-1].id != tiny_chat_gen.tokenizer.eos_token_id or len(tokens) > 1
    assert reads == [4] * len(tokens)  # one int32 per step: the logits stay on the GPU


def test_unconstrained_random_model_does_not_match(tiny_chat_gen):
    """The control: without the mask, the random model's text is not of the pattern's form."""
    list(tiny_chat_gen.generate("Answer:", max_new_tokens=12, temperature=1.0, seed=1))
    assert not re.fullmatch(PATTERN, tiny_chat_gen.stats["text"])


@pytest.mark.parametrize("seed", [0, 3])
def test_json_object_and_grammar_outputs_parse(tiny_chat_gen, seed):
    c = json_object_constraint(tiny_chat_gen.tokenizer)
    g = grammar_constraint(ARITH, tiny_chat_gen.tokenizer)
    list(tiny_chat_gen.generate("JSON:", constraint=c, max_new_tokens=60, **_sample_opts(seed)))
    text = tiny_chat_gen.stats["text"]
    # a random model may run out of tokens inside the object: then the text is a prefix the automaton accepts
    if len(tiny_chat_gen.stats["token_ids"]) < 60 or c.matches(text):
        assert isinstance(json.loads(text), dict), text
    list(tiny_chat_gen.generate("Sum:", constraint=g, max_new_tokens=30, **_sample_opts(seed)))
    text = tiny_chat_gen.stats["text"]
    if g.matches(text):
        ast.parse(text, mode="eval")
    else:  # cut by max_new_tokens: every token so far was allowed
        assert len(tiny_chat_gen.stats["token_ids"]) == 30


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, XDG_RUNTIME_DIR=tempfile.mkdtemp())  # no Mesa notices on stderr
    return subprocess.run([sys.executable, "-m", "webinfer.cli", "generate", *args], capture_output=True, text=True,
                          timeout=600, env=env)


def test_cli_regex_json_output_and_one_line_refusal(tiny_chat_wi, tmp_path):
    got = _cli(str(tiny_chat_wi), "--prompt", "Hi", "--regex", PATTERN, "--json", "--max-new-tokens", "40")
    assert got.returncode == 0, got.stderr
    out = json.loads(got.stdout.strip().splitlines()[-1])
    assert {"prompt_ids", "token_ids", "text", "prefill_tok_s", "decode_tok_s", "ttft_s"} <= set(out)
    assert re.fullmatch(PATTERN, out["text"]), out["text"]
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 2}}}))
    for flags in (["--regex", r"(a|b)*a(a|b){24}"], ["--json-schema", str(schema)],
                  ["--grammar", str(tmp_path / "missing.gbnf")]):
        bad = _cli(str(tiny_chat_wi), "--prompt", "Hi", *flags)
        assert bad.returncode != 0
        lines = [line for line in bad.stderr.splitlines() if "webinfer" in line or "Traceback" in line]
        assert len(lines) == 1 and lines[0].startswith("webinfer: error: "), bad.stderr
