"""A Qwen2 model as onnxruntime-genai's model builder writes it (fp32, CPU: GroupQueryAttention, its own copy of the
tokenizer files, genai_config.json), from a tiny random Qwen2 saved with transformers' save_pretrained beside the
Qwen2.5 family tokenizer (tokenizer_families.py: NFC normalizer, Qwen2's Split regex, byte-level BPE). Built for
generation, webinfer runs that folder from text: its prompt ids equal `tokenizers`' and onnxruntime-genai's own
tokenizer's, its greedy ids equal onnxruntime-genai's greedy search, and its text equals onnxruntime-genai's
decoding of them.

onnxruntime-genai's tokenizer (onnxruntime-extensions 0.18) does not apply the file's NFC normalizer: text not
already in NFC ("e" + U+0301, U+212B) encodes to other ids there than in `tokenizers` (and transformers, and
webinfer); for such a prompt the reference ids are `tokenizers'` alone.

onnxruntime-genai's tokenizer decodes as `tokenizers` does while the bytes are valid UTF-8; on an invalid sequence
it writes one U+FFFD and stops (its stream decoder drops the bytes), where `tokenizers` (and webinfer, which follows
it) writes U+FFFD for each and goes on. So the model's lm head never picks a token that is not whole characters
(random weights otherwise do, at almost every prompt); test_decoder_family_tokenizers.py covers broken sequences.
The export is cached under ~/.cache/webinfer/models by a hash of the config, the tokenizer and the builder's version.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import onnxruntime_genai as og  # noqa: E402  (a dev dependency: scripts/setup.sh installs it)
import pytest
from family_decoders import _export_fixtures, cache_root, tokenizer_config, tokenizer_json, vocab_size

import webinfer
from webinfer.llm import generate as generate_module

NEW_TOKENS = 16
PROMPTS = [
    "Hello, world!",
    "Grüße aus Zürich: naïve café",
    "東京で会いましょう。",
    "Привет, мир! مرحبا بالعالم",
    "def add(a, b):\n    return a + b  # 3.14159\n",
    "  spaces\tand emoji 😀👍🏽  ",
    "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n",
    "e\u0301 \u212b \ufb01 NFC: Å ﬁ",  # composed by the NFC normalizer
]


def genai_export() -> Path:
    """The builder's output folder for the tiny Qwen2 (exported on the first call, ~1 min)."""
    family = "qwen2.5"
    tok, cfg = tokenizer_json(family), tokenizer_config(family)
    fx = _export_fixtures()
    vocab = vocab_size(tok)
    key = hashlib.sha256(repr(("qwen2", fx.ARCHS["qwen2"], fx.COMMON, vocab, og.__version__, tok, cfg,
                               "whole characters")).encode())
    out = cache_root() / f"genai-qwen2-{key.hexdigest()[:10]}"
    if (out / "genai_config.json").is_file():
        return out
    work = out.with_name(out.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    hf = work / "hf"
    model = fx.make_model("qwen2", vocab=vocab)
    _whole_characters_only(model, tok)
    model.save_pretrained(hf)
    (hf / "tokenizer.json").write_text(tok, encoding="utf-8")
    (hf / "tokenizer_config.json").write_text(cfg, encoding="utf-8")
    cmd = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(hf), "-o", str(work / "out"),
           "-p", "fp32", "-e", "cpu", "-c", str(work / "cache")]
    subprocess.run(cmd, check=True, capture_output=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    shutil.rmtree(out, ignore_errors=True)
    os.replace(work / "out", out)
    shutil.rmtree(work, ignore_errors=True)
    return out


def _whole_characters_only(model, tok_json: str) -> None:
    """Zero the lm-head rows of tokens that are not whole UTF-8 characters (their logit 0 never wins over ~3,000
    random ones), so that the greedy text is valid UTF-8 and onnxruntime-genai's decode of it is total."""
    import torch
    from tokenizers import Tokenizer

    hf = Tokenizer.from_str(tok_json)
    head = model.get_output_embeddings().weight
    assert head.data_ptr() != model.get_input_embeddings().weight.data_ptr()  # untied: the prompt is unchanged
    with torch.no_grad():
        for i in range(head.shape[0]):
            if "\ufffd" in hf.decode([i]):
                head[i] = 0.0


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = genai_export()
    art = tmp_path_factory.mktemp("genai-qwen2") / "model.wi"
    webinfer.build(str(folder / "model.onnx"), str(art), max_seq=128)
    with pytest.MonkeyPatch.context() as mp:  # the standard-library encoder, as in the browser
        mp.setattr(generate_module, "_native_encoder", lambda _json: None)
        gen = generate_module.Generator.load(str(art))
    model = og.Model(str(folder))
    return folder, gen, model, og.Tokenizer(model)


def og_greedy(model, prompt: list[int], n: int) -> list[int]:
    """onnxruntime-genai's greedy search for exactly n tokens (min_length keeps its end-of-sequence ids out)."""
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt) + n, min_length=len(prompt) + n, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(prompt)
    out = []
    while not generator.is_done():
        generator.generate_next_token()
        out.append(int(generator.get_next_tokens()[0]))
    return out


def test_the_builder_wrote_qwen2_with_its_nfc_tokenizer(exported):
    folder = exported[0]
    config = json.loads((folder / "genai_config.json").read_text())
    assert config["model"]["type"] == "qwen2"
    assert json.loads((folder / "tokenizer.json").read_text())["normalizer"] == {"type": "NFC"}


def test_generates_onnxruntime_genai_text(exported):
    from tokenizers import Tokenizer

    folder, gen, model, og_tok = exported
    hf = Tokenizer.from_file(str(folder / "tokenizer.json"))
    for text in PROMPTS:
        want_prompt = hf.encode(text, add_special_tokens=False).ids
        assert gen.prompt_ids(text) == want_prompt, text
        if unicodedata.normalize("NFC", text) == text:  # onnxruntime-genai skips the NFC normalizer
            assert [int(i) for i in og_tok.encode(text)] == want_prompt, text
        list(gen.generate(text, max_new_tokens=NEW_TOKENS, stop_at_eos=False))
        assert gen.stats["prompt_ids"] == want_prompt
        want = og_greedy(model, want_prompt, NEW_TOKENS)
        assert gen.stats["token_ids"] == want, text
        assert gen.stats["text"] == og_tok.decode(want) == hf.decode(want, skip_special_tokens=True), text
