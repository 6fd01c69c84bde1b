"""The tokenizer.json pipeline: added tokens -> normalizer -> pre-tokenizer -> model -> post-processor, and
decoding through the decoder; `DecodeStream` for generation. Everything is built (and anything unsupported
refused, as `Unsupported` naming the component) when the file is loaded."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from . import decoders, models, normalizers, pre_tokenizers
from .added import AddedVocabulary
from .errors import Malformed
from .processors import Processor, padding, truncate, truncation

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_surrogates(text: str) -> str:
    """Pairs of surrogates (as JS strings hold them) joined, lone ones as U+FFFD, as a UTF-8 encoder writes them."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


class Pipeline:
    def __init__(self, spec: Mapping) -> None:
        if not isinstance(spec, Mapping) or not isinstance(spec.get("model"), Mapping):
            raise Malformed("tokenizer.json has no model")
        self.normalizer = normalizers.build(spec.get("normalizer"))
        self.pre_tokenizer = pre_tokenizers.build(spec.get("pre_tokenizer"))
        self.model = models.build(spec["model"])
        self.post = Processor(spec.get("post_processor"))
        self.decoder = decoders.build(spec.get("decoder"))
        self.added = AddedVocabulary(spec.get("added_tokens") or [], self.model, self.normalizer)
        self.truncation = truncation(spec.get("truncation"))
        self.padding = padding(spec.get("padding"))
        ids = [*self.model.id_to_str, *self.added.by_id]
        self.size = 1 + max(ids) if ids else 0

    # -- encoding -------------------------------------------------------------------------------------
    def tokenize(self, text: str) -> list[int]:
        """Ids of `text` without post-processing (no template tokens, no truncation)."""
        text = clean_surrogates(text)
        ids: list[int] = []
        offset = 0
        for seg, tid in self.added.split(text, normalized=False):
            start, offset = offset, offset + len(seg)
            if tid is not None:
                ids.append(tid)
            elif seg:
                self._plain(seg, start == 0, ids)
        return ids

    def _plain(self, seg: str, first: bool, ids: list[int]) -> None:
        if self.normalizer is not None:
            seg = self.normalizer(seg)
        at = 0
        for sub, tid in self.added.split(seg, normalized=True):
            start, at = at, at + len(sub)
            if tid is not None:
                ids.append(tid)
                continue
            if not sub:
                continue
            pieces = [(sub, first and start == 0)]
            if self.pre_tokenizer is not None:
                pieces = self.pre_tokenizer(pieces)
            tokenize = self.model.tokenize
            for piece, _first in pieces:
                ids.extend(tokenize(piece))

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """As `tokenizers`' Tokenizer.encode(text, add_special_tokens).ids."""
        ids = self.tokenize(text)
        if self.truncation is not None:
            max_length, left = self.truncation
            n_added = self.post.n_added if add_special_tokens else 0
            ids = truncate(ids, max_length - n_added, left)
        if add_special_tokens:
            ids = self.post.add(ids)
        return self.padding(ids) if self.padding is not None else ids

    # -- decoding -------------------------------------------------------------------------------------
    def id_to_token(self, tid: int) -> str | None:
        token = self.added.token(tid)
        return self.model.id_to_token(tid) if token is None else token

    def token_to_id(self, token: str) -> int | None:
        tid = self.added.content_to_id.get(token)
        return self.model.token_to_id(token) if tid is None else tid

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        tokens = []
        special = self.added.special
        for tid in ids:
            token = self.id_to_token(tid)
            if token is not None and not (skip_special_tokens and token in special):
                tokens.append(token)
        if self.decoder is None:
            return " ".join(tokens)
        return "".join(self.decoder(tokens)) if tokens else ""


class DecodeStream:
    """`tokenizers`' DecodeStream: text appears once the ids decode to more than the previous prefix and do
    not end in U+FFFD (a character still incomplete); only a short window of ids is decoded each step."""

    def __init__(self, pipeline: Pipeline, skip_special_tokens: bool = False) -> None:
        self.pipeline = pipeline
        self.skip = skip_special_tokens
        self.ids: list[int] = []
        self.prefix = ""
        self.prefix_index = 0

    def push(self, token_id: int) -> str:
        """Text completed by this token ('' while a character is still incomplete)."""
        decode = self.pipeline.decode
        if not self.prefix and self.ids:
            new_prefix = decode(self.ids, self.skip)
            if not new_prefix.endswith("\ufffd"):
                self.prefix, self.prefix_index = new_prefix, len(self.ids)
        self.ids.append(int(token_id))
        string = decode(self.ids, self.skip)
        if len(string) > len(self.prefix) and not string.endswith("\ufffd") and string.startswith(self.prefix):
            new_text = string[len(self.prefix):]
            new_prefix_index = len(self.ids) - self.prefix_index
            self.ids = self.ids[self.prefix_index:]
            self.prefix = decode(self.ids, self.skip)
            self.prefix_index = new_prefix_index
            return new_text
        return ""

    def flush(self) -> str:
        """End of stream: what is still held back (an incomplete character decodes as U+FFFD)."""
        string = self.pipeline.decode(self.ids, self.skip)
        out = string[len(self.prefix):] if string.startswith(self.prefix) else ""
        self.ids, self.prefix, self.prefix_index = [], "", 0
        return out
