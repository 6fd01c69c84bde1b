"""Pieces every token loop shares (decoder-only, speculative, encoder-decoder): a synchronous view of an async
token iterator, the text decoder of an artifact without a tokenizer, and the cached prefix a prompt reuses."""

from __future__ import annotations

from ..runtime.session import run_sync


def iterate_sync(agen):
    """The Tokens of the async iterator ``agen`` on a native device (reads never suspend); a caller that stops
    early closes it, so the generation records what the KV cache holds."""
    try:
        while True:
            try:
                yield run_sync(agen.__anext__())
            except StopAsyncIteration:
                return
    finally:
        run_sync(agen.aclose())


class NoText:
    """The stream decoder of an artifact without a tokenizer: tokens have no text."""

    def push(self, token: int) -> str:
        return ""

    def flush(self) -> str:
        return ""


def common_prefix(a: list[int], b: list[int], limit: int) -> int:
    """How many leading ids ``a`` and ``b`` share, at most ``limit``."""
    n = 0
    for x, y in zip(a, b):
        if x != y or n == limit:
            break
        n += 1
    return n
