"""BERT WordPiece tokenizer read from a Hugging Face ``tokenizer.json``, in standard-library Python.

Runs in CPython and Pyodide (the similarity demo tokenizes in the browser, where ``tokenizers`` cannot be
installed). It reproduces the ``tokenizers`` pipeline of BERT models (all-MiniLM-L6-v2 and kin):
  1. added tokens (``[CLS]``, ``[SEP]`` ... with ``normalized: false``) are cut out of the raw text first;
  2. ``BertNormalizer``: drop NUL, U+FFFD and "other" characters (Cc/Cf/Cn/Co/Cs, except tab/newline/CR),
     map White_Space to a space, put spaces around CJK ideographs, strip accents (NFD, drop Mn) when asked
     (by default when lowercasing), lowercase;
  3. ``BertPreTokenizer``: split on White_Space (dropped) and on punctuation (ASCII punctuation or Unicode
     P*, each kept alone);
  4. WordPiece: greedy longest match, ``##`` for continuations, a word longer than
     ``max_input_chars_per_word`` or with an unmatched piece becomes the unknown token;
  5. the ``TemplateProcessing`` post-processor: ``[CLS] A [SEP]``, truncated to ``truncation.max_length``.
Unicode categories come from this Python's ``unicodedata``; ``tokenizers`` uses its own (older) tables, so
characters assigned in between can differ (see tests/llm/test_wordpiece.py for what is checked).
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from pathlib import Path

__all__ = ["WordPieceTokenizer", "Encoding"]

_WHITE_SPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"
                         + "".join(chr(c) for c in range(0x2000, 0x200B)))
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
        (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
_ASCII_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_OTHER = frozenset(("Cc", "Cf", "Co", "Cs"))  # not Cn: `tokenizers` keeps unassigned code points


def _is_other(c: str) -> bool:
    return c not in "\t\n\r" and unicodedata.category(c) in _OTHER


def _is_cjk(c: str) -> bool:
    o = ord(c)
    return any(lo <= o <= hi for lo, hi in _CJK)


def _is_punct(c: str) -> bool:
    return c in _ASCII_PUNCT or unicodedata.category(c)[0] == "P"


def _compat_table() -> dict[str, str]:
    """Code point -> what `tokenizers` does with it, where its Unicode tables disagree with ours."""
    from ._wordpiece_compat import RANGES

    return {chr(cp): kind for lo, hi, kind in RANGES for cp in range(lo, hi + 1)}


class Encoding:
    """Ids plus the model's other two inputs (all ones / all zeros for a single sequence)."""

    def __init__(self, ids: list[int]):
        self.ids = ids
        self.attention_mask = [1] * len(ids)
        self.type_ids = [0] * len(ids)

    def __repr__(self) -> str:
        return f"Encoding(ids={self.ids})"


class WordPieceTokenizer:
    def __init__(self, spec: Mapping):
        model = spec.get("model") or {}
        if model.get("type") != "WordPiece":
            raise ValueError(f"not a WordPiece tokenizer.json (model type {model.get('type')!r})")
        self.vocab: dict[str, int] = dict(model["vocab"])
        self.prefix = model.get("continuing_subword_prefix", "##")
        self.max_chars = int(model.get("max_input_chars_per_word", 100))
        self.unk_id = self.vocab[model.get("unk_token", "[UNK]")]
        norm = spec.get("normalizer") or {}
        if norm and norm.get("type") != "BertNormalizer":
            raise ValueError(f"unsupported normalizer {norm.get('type')!r} (BertNormalizer only)")
        self.clean_text = bool(norm.get("clean_text", True))
        self.chinese = bool(norm.get("handle_chinese_chars", True))
        self.lowercase = bool(norm.get("lowercase", True))
        accents = norm.get("strip_accents")
        self.strip_accents = self.lowercase if accents is None else bool(accents)
        self.added = sorted((t["content"] for t in spec.get("added_tokens", []) if t.get("content")),
                            key=len, reverse=True)
        self.added_ids = {t["content"]: t["id"] for t in spec.get("added_tokens", [])}
        self.cls_id, self.sep_id = self._template_ids(spec.get("post_processor"))
        trunc = spec.get("truncation") or {}
        self.max_length = int(trunc["max_length"]) if trunc.get("max_length") else None
        self._cache: dict[str, list[int]] = {}
        self.compat = _compat_table()

    @classmethod
    def from_file(cls, path: str | Path) -> WordPieceTokenizer:
        with open(path, encoding="utf-8") as f:
            return cls(json.load(f))

    @classmethod
    def from_json(cls, text: str) -> WordPieceTokenizer:
        return cls(json.loads(text))

    def _template_ids(self, post: Mapping | None) -> tuple[int | None, int | None]:
        if not post:
            return None, None
        if post.get("type") == "BertProcessing":
            return post["cls"][1], post["sep"][1]
        if post.get("type") != "TemplateProcessing":
            raise ValueError(f"unsupported post-processor {post.get('type')!r}")
        single = post["single"]
        names = [p["SpecialToken"]["id"] if "SpecialToken" in p else "$A" for p in single]
        if len(names) != 3 or names[1] != "$A":
            raise ValueError(f"unsupported single template {names}")
        specials = post["special_tokens"]
        return specials[names[0]]["ids"][0], specials[names[2]]["ids"][0]

    # -- the pipeline ---------------------------------------------------------------------------------
    def normalize(self, text: str) -> str:
        compat = self.compat
        if self.clean_text:
            text = "".join(" " if c in _WHITE_SPACE else c for c in text
                           if c != "\0" and c != "\ufffd" and
                           (compat[c] != "drop" if c in compat else not _is_other(c)))
        if self.chinese:
            text = "".join(f" {c} " if _is_cjk(c) else c for c in text)
        if self.strip_accents:
            text = "".join(c for c in unicodedata.normalize("NFD", text)
                           if (compat[c] != "drop" if c in compat else unicodedata.category(c) != "Mn"))
        if self.lowercase:  # per character, as Rust does: str.lower() would make a final Σ into ς
            text = "".join(c.lower() for c in text) if "\u03a3" in text else text.lower()
        return text

    def pre_tokenize(self, text: str) -> list[str]:
        words, cur, compat = [], [], self.compat
        for c in text:
            if c in _WHITE_SPACE:
                if cur:
                    words.append("".join(cur))
                    cur = []
            elif compat[c] == "punct" if c in compat else _is_punct(c):
                if cur:
                    words.append("".join(cur))
                    cur = []
                words.append(c)
            else:
                cur.append(c)
        if cur:
            words.append("".join(cur))
        return words

    def _word_ids(self, word: str) -> list[int]:
        if word in self._cache:
            return self._cache[word]
        ids: list[int] = []
        start = 0 if len(word) <= self.max_chars else len(word)
        if start:
            ids = [self.unk_id]
        while start < len(word):
            end, found = len(word), None
            while start < end:
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                if piece in self.vocab:
                    found = self.vocab[piece]
                    break
                end -= 1
            if found is None:
                ids = [self.unk_id]
                break
            ids.append(found)
            start = end
        self._cache[word] = ids
        return ids

    def _split_added(self, text: str) -> list[tuple[str, bool]]:
        """Text -> [(segment, is_added_token)], leftmost then longest match, as ``tokenizers`` does."""
        out, i, plain = [], 0, 0
        while i < len(text):
            hit = next((t for t in self.added if text.startswith(t, i)), None)
            if hit is None:
                i += 1
                continue
            if plain < i:
                out.append((text[plain:i], False))
            out.append((hit, True))
            i += len(hit)
            plain = i
        if plain < len(text):
            out.append((text[plain:], False))
        return out

    def tokenize_ids(self, text: str) -> list[int]:
        """Ids of ``text`` without the template's special tokens and without truncation."""
        ids: list[int] = []
        for segment, added in self._split_added(text):
            if added:
                ids.append(self.added_ids[segment])
                continue
            for word in self.pre_tokenize(self.normalize(segment)):
                ids.extend(self._word_ids(word))
        return ids

    def encode(self, text: str, add_special_tokens: bool = True, truncate: bool = True) -> Encoding:
        if not isinstance(text, str):
            raise TypeError(f"encode expects a str, got {type(text).__name__}")
        ids = self.tokenize_ids(text)
        special = add_special_tokens and self.cls_id is not None
        if truncate and self.max_length is not None:
            ids = ids[: max(0, self.max_length - (2 if special else 0))]
        if special:
            ids = [self.cls_id, *ids, self.sep_id]
        return Encoding(ids)
