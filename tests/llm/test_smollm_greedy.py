"""The issue's bar: 64 greedy tokens from SmolLM2-135M-Instruct (fp32, built from the package) equal
onnxruntime's greedy loop on the same ONNX, on three chat prompts."""

from __future__ import annotations

import pytest

import webinfer
from demos.recipes.smollm2 import ort_greedy
from webinfer.llm.generate import Generator

PROMPTS = ["What is the capital of France?", "Write a short poem about the sea.",
           "Explain in two sentences why the sky is blue."]


@pytest.mark.slow
def test_smollm_greedy_64_tokens_match_onnxruntime(smollm_dir, tmp_path_factory):
    from tokenizers import Tokenizer

    art = tmp_path_factory.mktemp("smollm") / "smollm.wi"
    webinfer.build(str(smollm_dir / "model.onnx"), str(art), max_seq=256)
    gen = Generator.load(str(art))
    hf = Tokenizer.from_file(str(smollm_dir / "tokenizer.json"))
    for prompt in PROMPTS:
        text = gen.tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False)
        ids = hf.encode(text, add_special_tokens=False).ids
        want, ort_tps = ort_greedy(smollm_dir / "model.onnx", ids, 64)
        got = [t.id for t in gen.generate(ids, max_new_tokens=64, stop_at_eos=False)]
        print(f"\n{prompt!r}: {len(ids)} prompt tokens; webinfer decode {gen.stats['decode_tok_s']:.1f} tok/s, "
              f"ORT CPU {ort_tps:.1f} tok/s; text {gen.stats['text'][:60]!r}")
        assert got == want
