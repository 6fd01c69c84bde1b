"""The runtime's tokenizer: a Hugging Face `tokenizer.json` (+ tokenizer_config.json), in standard-library Python.

Runs unchanged in CPython and Pyodide (no numpy, no `tokenizers`). The pipeline itself (added tokens,
normalizers, pre-tokenizers, BPE / WordPiece / WordLevel / Unigram, post-processors, decoders) lives in
`webinfer.llm.tokenizers` and reproduces the `tokenizers` package exactly (tests/llm/test_tokenizer*.py compare
them on thousands of strings per family); a file it cannot reproduce is refused when loaded, naming the
component. This module adds what generation needs: the chat template, bos/eos ids from the config, streaming.
Unicode properties come from this Python's `unicodedata`; characters newer than its tables
(`unicodedata.unidata_version`) may split differently from a `tokenizers` build with newer tables.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..errors import WebinferError
from . import chat_template
from .tokenizers import DecodeStream, Pipeline, Unsupported, loads
from .tokenizers.bytelevel import bytes_to_unicode

__all__ = ["Tokenizer", "StreamDecoder", "bytes_to_unicode"]


class Tokenizer:
    """Encode/decode with a `tokenizer.json`; optional chat template and bos/eos from tokenizer_config."""

    def __init__(self, spec: Mapping, config: Mapping | None = None) -> None:
        """`spec` as `tokenizers.loads` reads it (Unigram scores parsed as serde_json does)."""
        try:
            self.pipeline = Pipeline(spec)
        except Unsupported as e:
            raise WebinferError(f"tokenizer.json: {e.describe()}") from None
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
            raise WebinferError(f"tokenizer.json is malformed ({type(e).__name__}: {e})") from None
        self.config = dict(config or {})

    @classmethod
    def from_file(cls, path: str | Path, config_path: str | Path | None = None) -> Tokenizer:
        """Load tokenizer.json (and tokenizer_config.json beside it when present)."""
        path = Path(path)
        spec = loads(path.read_text(encoding="utf-8"))
        config_path = Path(config_path) if config_path else path.with_name("tokenizer_config.json")
        config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else None
        return cls(spec, config)

    @classmethod
    def from_json(cls, tokenizer_json: str, config_json: str | None = None) -> Tokenizer:
        """Load from JSON text (what a browser fetch() returns)."""
        try:
            spec = loads(tokenizer_json)
        except ValueError as e:
            raise WebinferError(f"tokenizer.json is not valid JSON ({e})") from None
        return cls(spec, json.loads(config_json) if config_json else None)

    # -- encoding and decoding --------------------------------------------------------------------------
    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Token ids of `text`; added/special tokens written in the text become their ids. The post-processor's
        tokens (a BOS, [CLS] ... [SEP]) only with `add_special_tokens` (a chat template writes its own)."""
        if not isinstance(text, str):
            raise WebinferError(f"encode expects a str, got {type(text).__name__}")
        try:
            return self.pipeline.encode(text, add_special_tokens)
        except ValueError as e:  # e.g. a Unigram model without an unknown token meeting an unknown character
            raise WebinferError(f"tokenizer: {e}") from None

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        """Text of `ids` through the tokenizer's decoder (invalid UTF-8 becomes U+FFFD, as in `tokenizers`)."""
        return self.pipeline.decode(ids, skip_special_tokens)

    def stream_decoder(self, skip_special_tokens: bool = False) -> StreamDecoder:
        """A decoder for generation: push ids one at a time, get only whole characters back."""
        return StreamDecoder(self, skip_special_tokens)

    # -- vocabulary and chat --------------------------------------------------------------------------
    def token_to_id(self, token: str) -> int | None:
        return self.pipeline.token_to_id(token)

    def id_to_token(self, token_id: int) -> str | None:
        return self.pipeline.id_to_token(token_id)

    @property
    def special_ids(self) -> set[int]:
        added = self.pipeline.added
        return {tid for tid, tok in added.by_id.items() if tok.get("special")}

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
        return self.pipeline.size

    def apply_chat_template(self, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True,
                            tokenize: bool = True, use_jinja: bool | None = None) -> list[int] | str:
        """The model's own chat template (llm/chat_template.py: jinja2 natively, the build's precomputed format
        in the browser). Without a template, ChatML (`render_chatml`) where the vocabulary has ChatML's tokens;
        else a one-line error, as transformers gives (a made-up format would only be text to such a model). Ids
        unless `tokenize` is false."""
        text = chat_template.render(self.config, messages, add_generation_prompt, use_jinja)
        if text is None:
            if self.token_to_id("<|im_start|>") is None or self.token_to_id("<|im_end|>") is None:
                raise WebinferError("this model has no chat template (tokenizer_config.json's chat_template) and its "
                                    "vocabulary has no ChatML tokens: give the prompt as plain text")
            text = render_chatml(messages, add_generation_prompt, default_system_prompt(self.config))
        return self.encode(text) if tokenize else text


class StreamDecoder(DecodeStream):
    """Incremental decoding that never emits half a character (`tokenizers`' DecodeStream)."""

    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool = False) -> None:
        super().__init__(tokenizer.pipeline, skip_special_tokens)
        self.tokenizer = tokenizer


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
