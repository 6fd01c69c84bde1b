"""Multi-turn chat and prefix reuse: the KV cache outlives a generation, and a prompt that starts with what
the cache holds prefills only the rest. Every turn is compared with onnxruntime's greedy loop over the WHOLE
conversation from position 0 (no cache reuse there), and the conversation's ids with transformers'
apply_chat_template + `tokenizers`."""

from __future__ import annotations

import random

import pytest

from demos.recipes.smollm2 import ort_greedy
from webinfer.errors import WebinferError


@pytest.fixture(scope="module")
def hf_tokenizer(tiny_chat_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_chat_dir))


def _reference_ids(hf_tokenizer, messages) -> list[int]:
    text = hf_tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return list(hf_tokenizer.encode(text, add_special_tokens=False))


def _ids(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(3, 512) for _ in range(n)]


def test_second_turn_matches_onnxruntime_over_the_whole_conversation(tiny_chat_dir, tiny_chat_gen, hf_tokenizer):
    model = tiny_chat_dir / "model.onnx"
    tiny_chat_gen.reset()
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    first = [t.id for t in tiny_chat_gen.chat(messages, max_new_tokens=10)]
    prompt1 = _reference_ids(hf_tokenizer, messages)
    assert tiny_chat_gen.stats["prompt_ids"] == list(prompt1) and tiny_chat_gen.stats["reused_tokens"] == 0
    assert first == ort_greedy(model, list(prompt1), len(first))[0]

    messages += [{"role": "assistant", "content": tiny_chat_gen.stats["text"]},
                 {"role": "user", "content": "And the capital of Italy? Answer in one word."}]
    second = [t.id for t in tiny_chat_gen.chat(messages, max_new_tokens=10)]
    conversation = _reference_ids(hf_tokenizer, messages)
    assert tiny_chat_gen.stats["prompt_ids"] == conversation
    # The first turn's prompt at least is not prefilled again (the answer too, where its text re-encodes to
    # the ids that were generated; a random model's ids need not).
    reused = tiny_chat_gen.stats["reused_tokens"]
    assert len(prompt1) <= reused < len(conversation)
    assert conversation[:reused] == (list(prompt1) + first)[:reused]
    assert second == ort_greedy(model, conversation, len(second))[0]


def test_prefix_reuse_prefills_only_the_rest(tiny_llama_dir, tiny_gen):
    model = tiny_llama_dir / "model.onnx"
    tiny_gen.reset()
    a = _ids(40, 7)
    out = [t.id for t in tiny_gen.generate(a, max_new_tokens=6, stop_at_eos=False)]
    # The cache holds a + out[:-1] (the last token was never fed back): continuing the same text reuses it.
    b = a + out + _ids(9, 8)
    got = [t.id for t in tiny_gen.generate(b, max_new_tokens=8, stop_at_eos=False)]
    assert tiny_gen.stats["reused_tokens"] == len(a) + len(out) - 1
    assert got == ort_greedy(model, b, 8)[0]
    # A prompt that leaves the cached ids at position 25 prefills from there, and still matches.
    c = b[:25] + _ids(30, 9)
    got = [t.id for t in tiny_gen.generate(c, max_new_tokens=8, stop_at_eos=False)]
    assert tiny_gen.stats["reused_tokens"] == 25
    assert got == ort_greedy(model, c, 8)[0]
    # The same prompt again: everything but its last token comes from the cache.
    again = [t.id for t in tiny_gen.generate(c, max_new_tokens=8, stop_at_eos=False)]
    assert tiny_gen.stats["reused_tokens"] == len(c) - 1 and again == got


def test_stopping_early_keeps_the_cache_consistent(tiny_llama_dir, tiny_gen):
    """A caller that stops iterating, and a cancel, leave the cache holding exactly what the next turn reuses."""
    model = tiny_llama_dir / "model.onnx"
    tiny_gen.reset()
    a = _ids(20, 11)
    seen = []
    for tok in tiny_gen.generate(a, max_new_tokens=30, stop_at_eos=False):
        seen.append(tok.id)
        if len(seen) == 4:
            break
    b = a + seen + _ids(5, 12)
    got = [t.id for t in tiny_gen.generate(b, max_new_tokens=6, stop_at_eos=False)]
    assert tiny_gen.stats["reused_tokens"] == len(a) + 3 and got == ort_greedy(model, b, 6)[0]
    seen = []
    for tok in tiny_gen.generate(b + got, max_new_tokens=30, stop_at_eos=False):
        seen.append(tok.id)
        if len(seen) == 2:
            tiny_gen.cancel()
    assert tiny_gen.stats["cancelled"] and len(seen) == 2
    c = b + got + seen + _ids(3, 13)
    got_c = [t.id for t in tiny_gen.generate(c, max_new_tokens=5, stop_at_eos=False)]
    assert tiny_gen.stats["reused_tokens"] == len(b) + len(got) + 1 and got_c == ort_greedy(model, c, 5)[0]


def test_a_conversation_past_max_seq_is_a_clear_error(tiny_chat_dir, tmp_path):
    import webinfer
    from webinfer.llm.generate import Generator

    art = tmp_path / "short.wi"
    webinfer.build(str(tiny_chat_dir / "model.onnx"), str(art), max_seq=64, target="software")
    gen = Generator.load(str(art))
    messages = [{"role": "user", "content": "Hello there, how are you?"}]
    answer = [t.id for t in gen.chat(messages, max_new_tokens=4, stop_at_eos=False)]
    cached = gen.stats["prompt_ids"] + answer[:-1]
    messages += [{"role": "assistant", "content": gen.stats["text"]},
                 {"role": "user", "content": "Tell me a long story about a dragon, a knight and a castle."}]
    with pytest.raises(WebinferError, match=r"exceeds the KV cache of 64 positions \(start a new conversation"):
        next(gen.chat(messages, max_new_tokens=16))
    # The refused turn left the cache alone: the first turn's prefix is still reused.
    second = [t.id for t in gen.chat(messages[:1], max_new_tokens=3, stop_at_eos=False)]
    assert gen.stats["reused_tokens"] == len(gen.stats["prompt_ids"]) - 1
    assert gen.stats["prompt_ids"] == cached[:len(gen.stats["prompt_ids"])]
    assert second == ort_greedy(tiny_chat_dir / "model.onnx", gen.stats["prompt_ids"], 3)[0]


def test_bad_messages_are_clear_errors(tiny_gen):
    for bad, match in (([], "non-empty list"), ([{"role": "user"}], "string 'role' and 'content'"),
                       ([{"role": "robot", "content": "hi"}], "not one of system, user, assistant"),
                       ("hello", "non-empty list")):
        with pytest.raises(WebinferError, match=match):
            next(tiny_gen.chat(bad))
