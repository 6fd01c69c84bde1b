"""The decoder matrix from text: each architecture with its family's own tokenizer (family_decoders.py) built
for generation, the tokenizer files travelling as the artifact's assets. From text prompts (multilingual, code,
the family's special tokens written in the text) and one chat turn:
- the prompt ids of webinfer's standard-library tokenizer (the one the browser runs; the native `tokenizers`
  shortcut is turned off here) equal `tokenizers`' encoding of the same text without special tokens (the
  Generator's convention: a prompt is encoded as written), and the chat turn's ids equal transformers'
  apply_chat_template over the same tokenizer files;
- the generated ids equal onnxruntime's greedy loop over the same model.onnx;
- the streamed text equals `tokenizers`' decode of those ids with skip_special_tokens=True (the Generator
  streams without special tokens).
The random weights make the generated ids arbitrary: special tokens, byte-fallback pieces and broken UTF-8
sequences all occur, so the streaming decode is exercised on them too."""

from __future__ import annotations

import pytest
from family_decoders import CONFIGS, PAIRS, model_dir
from tokenizer_families import EXTRA, SPECIALS

import webinfer
from demos.recipes.smollm2 import ort_greedy
from webinfer.llm import generate as generate_module

NEW_TOKENS = 12
MAX_SEQ = 192
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Grüße aus Zürich: naïve café, 東京で会いましょう。 Привет, мир! مرحبا",
    "def add(a, b):\n    return a + b  # 3.14159 * 2048\n\n\n",
    "  leading spaces,\ttabs and emoji 😀👍🏽 at the end   ",
]
CHAT = {
    "system": [{"role": "system", "content": "You answer in one line."},
               {"role": "user", "content": "Wie spät ist es? 今何時ですか"}],
    "user": [{"role": "user", "content": "Wie spät ist es? 今何時ですか"}],
}


def prompts(family: str) -> list[str]:
    """The shared texts and one with the family's special (and other added) tokens written in it."""
    specials = SPECIALS[family]
    extra = [t["content"] for t in EXTRA.get(family, [])]
    marked = f"{specials[-1]}Hello{specials[0]} world {' '.join(extra)} x{specials[len(specials) // 2]}\n"
    return [*TEXTS, marked]


@pytest.fixture(scope="module", params=[f"{arch}+{family}" for arch, family in PAIRS])
def pair(request, tmp_path_factory):
    """(folder, Generator over its artifact with the standard-library encoder, tokenizers.Tokenizer)."""
    from tokenizers import Tokenizer

    arch, family = request.param.split("+")
    folder = model_dir(arch, family)
    art = tmp_path_factory.mktemp(f"{arch}-{family}") / "model.wi"
    webinfer.build(str(folder / "model.onnx"), str(art), max_seq=MAX_SEQ)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(generate_module, "_native_encoder", lambda _json: None)
        gen = generate_module.Generator.load(str(art))
    return family, folder, gen, Tokenizer.from_file(str(folder / "tokenizer.json"))


def _check_generation(folder, gen, hf, want_prompt: list[int]) -> None:
    assert gen.stats["prompt_ids"] == want_prompt
    want, _ = ort_greedy(folder / "model.onnx", want_prompt, NEW_TOKENS)
    assert gen.stats["token_ids"] == want
    assert gen.stats["text"] == hf.decode(want, skip_special_tokens=True)


def test_text_prompts_generate_like_onnxruntime(pair):
    family, folder, gen, hf = pair
    assert gen.tokenizer.vocab_size == hf.get_vocab_size(with_added_tokens=True)
    for text in prompts(family):
        want_prompt = hf.encode(text, add_special_tokens=False).ids
        assert gen.prompt_ids(text) == want_prompt, text
        streamed = "".join(t.text for t in gen.generate(text, max_new_tokens=NEW_TOKENS, stop_at_eos=False))
        _check_generation(folder, gen, hf, want_prompt)
        assert gen.stats["text"].startswith(streamed)  # the decoder's flush only appends


@pytest.mark.parametrize("conversation", sorted(CHAT))
def test_chat_turn_matches_transformers_template(pair, conversation):
    from transformers import AutoTokenizer

    family, folder, gen, hf = pair
    messages = CHAT[conversation]
    if CONFIGS[family][2] is None:  # the family ships no chat template: chat is refused in one line
        with pytest.raises(webinfer.WebinferError, match="chat template"):
            gen.chat_ids(messages)
        return
    reference = AutoTokenizer.from_pretrained(str(folder))
    try:
        want_prompt = list(reference.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                         return_dict=True)["input_ids"])
    except Exception:  # the template itself refuses (Gemma, Mistral: no system role): so does webinfer
        with pytest.raises(webinfer.WebinferError):
            gen.chat_ids(messages)
        return
    assert gen.chat_ids(messages) == want_prompt
    list(gen.chat(messages, max_new_tokens=NEW_TOKENS, stop_at_eos=False))
    _check_generation(folder, gen, hf, want_prompt)
