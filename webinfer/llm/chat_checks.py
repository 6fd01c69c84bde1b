"""The checks a chat request passes before any model work: its messages and its sampling options. Apart from
generate.py so that the page's CPU path (page_cpu.py) checks requests as the WebGPU path does without importing
the GPU session behind generation (its start in Pyodide pays for every module imported)."""

from __future__ import annotations

import math
import operator

from ..errors import WebinferError


def check_messages(messages) -> None:
    if not isinstance(messages, (list, tuple)) or not messages:
        raise WebinferError("messages must be a non-empty list of {role, content} objects")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise WebinferError(f"messages[{i}] must be an object with string 'role' and 'content'")
        if m["role"] not in ("system", "user", "assistant"):
            raise WebinferError(f"messages[{i}]: role {m['role']!r} is not one of system, user, assistant")


def check_options(max_new_tokens, temperature, top_k, top_p, repetition_penalty, seed=0) -> None:
    """Sampling settings the GPU sampler can honour (NaN fails every comparison, so each test is written
    to fail on it)."""
    if not _int_in(max_new_tokens, 1, None):
        raise WebinferError("max_new_tokens must be at least 1")
    if not (math.isfinite(temperature) and temperature >= 0):
        raise WebinferError(f"temperature must be a finite number >= 0 (0 is greedy), got {temperature}")
    if not _int_in(top_k, 0, 2**24 - 1):
        raise WebinferError(f"top_k must be an integer >= 0 (0 turns it off), got {top_k}")
    if not (math.isfinite(top_p) and 0.0 < top_p <= 1.0):
        raise WebinferError(f"top_p must be in (0, 1], got {top_p}")
    if not (math.isfinite(repetition_penalty) and repetition_penalty > 0):
        raise WebinferError(f"repetition_penalty must be a finite number > 0, got {repetition_penalty}")
    if not _int_in(seed, 0, 2**32 - 1):
        raise WebinferError(f"seed must be an integer in 0..{2**32 - 1} (the sampler's seed is 32 bits), got {seed}")


def _int_in(value, lo: int, hi: int | None) -> bool:
    try:
        value = operator.index(value)
    except TypeError:
        return False
    return lo <= value and (hi is None or value <= hi)
