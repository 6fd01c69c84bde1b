"""Byte-level BPE tokenizer read from a Hugging Face `tokenizer.json`, in standard-library Python.

Runs unchanged in CPython and Pyodide (no numpy, no `tokenizers`). It reproduces the `tokenizers`
pipeline that GPT-2 style models use (SmolLM2, StarCoder, GPT-2):
  1. added tokens (`<|im_start|>` ...) are cut out of the raw text first, longest match at the
     leftmost position; they never go through the steps below;
  2. pre-tokenizers: `Digits` (every numeric character alone when `individual_digits`) and `ByteLevel`,
     whose `use_regex` split is GPT-2's pattern
        's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
     Python's `re` has no \\p{..}, so the letter and number classes are built once from
     `unicodedata.category` (L* and N*), and \\s is Unicode White_Space as in Oniguruma (Python's own \\s
     also matches U+001C..U+001F, which Oniguruma does not);
  3. each piece is mapped byte-by-byte to GPT-2's printable alphabet and merged by BPE rank (cached per
     piece, so repeated words cost one dict lookup);
  4. decoding maps tokens back to bytes and decodes UTF-8 with replacement, like `from_utf8_lossy`.
Characters newer than this Python's Unicode tables (`unicodedata.unidata_version`) are classified as
unassigned, so they may split differently from a `tokenizers` build with newer tables.
"""

from __future__ import annotations

import codecs
import itertools
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..errors import WebinferError
from . import chat_template

__all__ = ["Tokenizer", "StreamDecoder", "bytes_to_unicode"]

# Unicode White_Space, which is Oniguruma's \s for UTF-8 text.
_WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_CLASSES: dict[str, str] = {}


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table (printable Latin-1 bytes map to themselves)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def _unicode_classes() -> dict[str, str]:
    """Regex character-class bodies for \\p{L} and \\p{N}, built once from unicodedata (~0.2 s)."""
    if not _CLASSES:
        ranges: dict[str, list[list[int]]] = {"L": [], "N": []}
        category = unicodedata.category
        # Letters and numbers live in planes 0-3 and 14 only (4-13 are unassigned, 15-16 private use):
        # scanning those is 3x cheaper, which matters in Pyodide.
        for cp in itertools.chain(range(0x40000), range(0xE0000, 0xF0000)):
            major = category(chr(cp))[0]
            if major in ranges:
                spans = ranges[major]
                if spans and spans[-1][1] == cp - 1:
                    spans[-1][1] = cp
                else:
                    spans.append([cp, cp])
        for key, spans in ranges.items():
            _CLASSES[key] = "".join(
                f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in spans)
    return _CLASSES


def _gpt2_pattern() -> re.Pattern[str]:
    cls = _unicode_classes()
    letters, numbers, ws = cls["L"], cls["N"], _WHITE_SPACE
    return re.compile(
        rf"'s|'t|'re|'ve|'m|'ll|'d| ?[{letters}]+| ?[{numbers}]+| ?[^{ws}{letters}{numbers}]+"
        rf"|[{ws}]+(?![^{ws}])|[{ws}]+")


class _PreTokenizer:
    """The supported part of `tokenizers`' pre-tokenizers: Sequence, Digits, ByteLevel."""

    def __init__(self, spec: Mapping | None) -> None:
        self.steps: list[tuple[str, object]] = []
        self.byte_level = False
        self._add(spec)

    def _add(self, spec: Mapping | None) -> None:
        if spec is None:
            return
        kind = spec.get("type")
        if kind == "Sequence":
            for sub in spec["pretokenizers"]:
                self._add(sub)
        elif kind == "Digits":
            numbers = _unicode_classes()["N"]
            one = "" if spec.get("individual_digits") else "+"
            self.steps.append(("split", re.compile(f"[{numbers}]{one}")))
        elif kind == "ByteLevel":
            if spec.get("add_prefix_space"):
                raise WebinferError("tokenizer.json: ByteLevel add_prefix_space=true is not supported")
            self.byte_level = True
            if spec.get("use_regex", True):
                self.steps.append(("find", _gpt2_pattern()))
        else:
            raise WebinferError(f"tokenizer.json: pre_tokenizer {kind!r} is not supported")

    def __call__(self, text: str) -> list[str]:
        pieces = [text]
        for how, pattern in self.steps:
            out: list[str] = []
            for piece in pieces:
                if how == "find":
                    out += pattern.findall(piece)
                else:  # isolate each match, keep the text between matches
                    at = 0
                    for m in pattern.finditer(piece):
                        if m.start() > at:
                            out.append(piece[at:m.start()])
                        out.append(m.group())
                        at = m.end()
                    if at < len(piece):
                        out.append(piece[at:])
            pieces = out
        return pieces


class Tokenizer:
    """Encode/decode with a byte-level BPE `tokenizer.json`; optional chat template from tokenizer_config."""

    def __init__(self, spec: Mapping, config: Mapping | None = None) -> None:
        model = spec["model"]
        if model.get("type", "BPE") != "BPE":
            raise WebinferError(f"tokenizer.json: model {model.get('type')!r} is not supported (BPE only)")
        if spec.get("normalizer") is not None:
            raise NotImplementedError(f"normalizer {spec['normalizer'].get('type')!r} is not supported")
        self.vocab: dict[str, int] = dict(model["vocab"])
        self.unk: str | None = model.get("unk_token")
        if model.get("byte_fallback") or model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
            raise NotImplementedError("byte_fallback and subword prefixes/suffixes are not supported")
        merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
        self.ranks: dict[tuple[str, str], int] = {pair: i for i, pair in enumerate(merges)}
        self.pre = _PreTokenizer(spec.get("pre_tokenizer"))
        if not self.pre.byte_level:
            raise NotImplementedError("only byte-level BPE tokenizers are supported")
        self.byte_encoder = bytes_to_unicode()
        self.byte_decoder = {c: b for b, c in self.byte_encoder.items()}
        self.added: dict[str, int] = {t["content"]: t["id"] for t in spec.get("added_tokens", [])}
        self.special_ids = {t["id"] for t in spec.get("added_tokens", []) if t.get("special")}
        self.id_to_token: list[str | None] = [None] * (1 + max([*self.vocab.values(), *self.added.values()]))
        for token, i in [*self.vocab.items(), *self.added.items()]:
            self.id_to_token[i] = token
        by_length = sorted(self.added, key=len, reverse=True)  # `re` is leftmost-first: longest first
        self._added_re = re.compile("|".join(map(re.escape, by_length))) if by_length else None
        self._cache: dict[str, tuple[int, ...]] = {}
        self._token_bytes: dict[int, bytes] = {}
        self.config = dict(config or {})

    @classmethod
    def from_file(cls, path: str | Path, config_path: str | Path | None = None) -> Tokenizer:
        """Load tokenizer.json (and tokenizer_config.json beside it when present)."""
        path = Path(path)
        spec = json.loads(path.read_text(encoding="utf-8"))
        config_path = Path(config_path) if config_path else path.with_name("tokenizer_config.json")
        config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else None
        return cls(spec, config)

    @classmethod
    def from_json(cls, tokenizer_json: str, config_json: str | None = None) -> Tokenizer:
        """Load from JSON text (what a browser fetch() returns)."""
        return cls(json.loads(tokenizer_json), json.loads(config_json) if config_json else None)

    # -- encoding -------------------------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        """Token ids of `text`; added/special tokens written in the text become their ids."""
        ids: list[int] = []
        at = 0
        if self._added_re is not None:
            for m in self._added_re.finditer(text):
                if m.start() > at:
                    self._encode_plain(text[at:m.start()], ids)
                ids.append(self.added[m.group()])
                at = m.end()
        if at < len(text):
            self._encode_plain(text[at:], ids)
        return ids

    def _encode_plain(self, text: str, ids: list[int]) -> None:
        cache = self._cache
        for piece in self.pre(text):
            word = cache.get(piece)
            if word is None:
                word = cache[piece] = self._bpe("".join(self.byte_encoder[b] for b in piece.encode("utf-8")))
            ids.extend(word)

    def _bpe(self, word: str) -> tuple[int, ...]:
        """Merge the lowest-ranked adjacent pair, all its occurrences left to right, until none merges.
        Characters missing from the vocabulary (some control bytes) are dropped first, as `tokenizers`
        does without an unk token, so their neighbours can still merge."""
        vocab = self.vocab
        parts = [c for c in word if c in vocab] if self.unk is None else [c if c in vocab else self.unk for c in word]
        ranks = self.ranks
        while len(parts) > 1:
            best, best_rank = None, len(ranks)
            for pair in zip(parts, parts[1:]):
                rank = ranks.get(pair)
                if rank is not None and rank < best_rank:
                    best, best_rank = pair, rank
            if best is None:
                break
            first, second = best
            merged: list[str] = []
            i = 0
            while i < len(parts):
                if i + 1 < len(parts) and parts[i] == first and parts[i + 1] == second:
                    merged.append(first + second)
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        return tuple(vocab[p] for p in parts)

    # -- decoding -------------------------------------------------------------------------------------
    def token_bytes(self, token_id: int) -> bytes:
        """Bytes of one token: byte-level characters mapped back, else the token's own UTF-8 (as
        `tokenizers`' ByteLevel decoder does for added tokens such as `<|im_end|>`)."""
        cached = self._token_bytes.get(token_id)
        if cached is None:
            token = self.id_to_token[token_id] if 0 <= token_id < len(self.id_to_token) else None
            if token is None:
                raise KeyError(f"unknown token id {token_id}")
            decoder = self.byte_decoder
            if all(c in decoder for c in token):
                cached = bytes(decoder[c] for c in token)
            else:
                cached = token.encode("utf-8")
            self._token_bytes[token_id] = cached
        return cached

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        """Text of `ids`; invalid UTF-8 (a sequence cut mid-character) becomes U+FFFD."""
        skip = self.special_ids if skip_special_tokens else ()
        return b"".join(self.token_bytes(i) for i in ids if i not in skip).decode("utf-8", "replace")

    def stream_decoder(self, skip_special_tokens: bool = False) -> StreamDecoder:
        """A decoder for generation: push ids one at a time, get only whole characters back."""
        return StreamDecoder(self, skip_special_tokens)

    # -- vocabulary and chat --------------------------------------------------------------------------
    def token_to_id(self, token: str) -> int | None:
        return self.added.get(token, self.vocab.get(token))

    def _config_token_id(self, key: str) -> int | None:
        value = self.config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        return self.token_to_id(value) if isinstance(value, str) else None

    @property
    def eos_token_id(self) -> int | None:
        return self._config_token_id("eos_token")

    @property
    def bos_token_id(self) -> int | None:
        return self._config_token_id("bos_token")

    @property
    def vocab_size(self) -> int:
        return len(self.id_to_token)

    def apply_chat_template(self, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True,
                            tokenize: bool = True, use_jinja: bool | None = None) -> list[int] | str:
        """The model's own chat template (llm/chat_template.py: jinja2 natively, the build's precomputed format
        in the browser); ChatML (`render_chatml`) only when the config has no template. Ids unless `tokenize`
        is false."""
        text = chat_template.render(self.config, messages, add_generation_prompt, use_jinja)
        if text is None:
            text = render_chatml(messages, add_generation_prompt, default_system_prompt(self.config))
        return self.encode(text) if tokenize else text


class StreamDecoder:
    """Incremental decoding that never emits half a UTF-8 character: pending bytes wait for the rest."""

    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool = False) -> None:
        self.tokenizer = tokenizer
        self.skip = tokenizer.special_ids if skip_special_tokens else frozenset()
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")

    def push(self, token_id: int) -> str:
        """Text completed by this token ('' while a character is still incomplete)."""
        if token_id in self.skip:
            return ""
        return self._utf8.decode(self.tokenizer.token_bytes(token_id))

    def flush(self) -> str:
        """End of stream: an incomplete trailing character becomes U+FFFD."""
        return self._utf8.decode(b"", final=True)


_SYSTEM_RE = re.compile(r"'<\|im_start\|>system\n(.*?)<\|im_end\|>\n'", re.S)


def default_system_prompt(config: Mapping) -> str | None:
    """The system prompt SmolLM2-style templates insert when the chat has none (None: template adds none)."""
    template = config.get("chat_template")
    if not isinstance(template, str):
        return None
    match = _SYSTEM_RE.search(template)
    return match.group(1) if match else None


def render_chatml(messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True,
                  default_system: str | None = None) -> str:
    """`<|im_start|>{role}\\n{content}<|im_end|>\\n` per message, as SmolLM2's template renders it: when the
    first message is not a system message, `default_system` goes first; the generation prompt opens an
    assistant turn."""
    parts = []
    if messages and messages[0]["role"] != "system" and default_system is not None:
        parts.append(f"<|im_start|>system\n{default_system}<|im_end|>\n")
    parts += [f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages]
    if add_generation_prompt:
        parts.append("<|im_start|>assistant\n")
    return "".join(parts)
