"""tokenizer.json read with serde_json's float parsing, which Unigram scores must match bit for bit.

serde_json (without its float_roundtrip feature, as `tokenizers` builds it) reads a decimal as its digits in a
u64 (digits past 19 dropped), converted to f64, then multiplied or divided by a power of ten: two roundings, so
about one score in seven differs by an ulp from Python's correctly rounded float(). Viterbi ties between
segmentations then break differently; reading the scores the same way keeps the ids equal.
"""

from __future__ import annotations

import json
from typing import Any

_POW10 = [float(f"1e{k}") for k in range(309)]
_U64 = 2**64 - 1


def serde_f64(text: str) -> float:
    """serde_json's f64_from_parts for one JSON number with a fraction or exponent."""
    i, n = 0, len(text)
    negative = text.startswith("-")
    if negative:
        i = 1
    significand, exponent = 0, 0
    while i < n and "0" <= text[i] <= "9":
        digit = ord(text[i]) - 48
        if significand * 10 + digit > _U64:
            exponent += 1
        else:
            significand = significand * 10 + digit
        i += 1
    if i < n and text[i] == ".":
        i += 1
        overflow = False
        while i < n and "0" <= text[i] <= "9":
            digit = ord(text[i]) - 48
            if not overflow and significand * 10 + digit <= _U64:
                significand = significand * 10 + digit
                exponent -= 1
            else:
                overflow = True
            i += 1
    if i < n and text[i] in "eE":
        exponent += int(text[i + 1:])
    value = float(significand)
    while True:
        k = abs(exponent)
        if k < len(_POW10):
            value = value * _POW10[k] if exponent >= 0 else value / _POW10[k]
            break
        if value == 0.0:
            break
        value /= 1e308
        exponent += 308
    return -value if negative else value


def loads(text: str | bytes) -> Any:
    return json.loads(text, parse_float=serde_f64)
