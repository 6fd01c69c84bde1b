"""Pre-tokenizers of tokenizer.json. A piece is (text, first): `first` when it starts at offset 0 of the input
(Metaspace's prepend_scheme "first" looks at that). Splits follow `tokenizers`' SplitDelimiterBehavior; empty
pieces are dropped, as `tokenizers` drops empty splits."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from .bytelevel import to_byte_level
from .errors import Unsupported
from .normalizers import compat
from .uregex import (
    WHITE_SET,
    WHITE_SPACE,
    compile_literal,
    compile_onig,
    is_numeric,
    is_punctuation,
    rust_word_class,
)

Piece = tuple[str, bool]
PreTokenizer = Callable[[list[Piece]], list[Piece]]
Matches = list[tuple[int, int, bool]]

GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
BEHAVIORS = ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous")


def regex_matches(regex: re.Pattern[str], text: str) -> Matches:
    out: Matches = []
    prev = 0
    for m in regex.finditer(text):
        s, e = m.span()
        if prev != s:
            out.append((prev, s, False))
        out.append((s, e, True))
        prev = e
    if prev != len(text):
        out.append((prev, len(text), False))
    return out


def char_matches(test: Callable[[str], bool], text: str) -> Matches:
    """Every character passing `test` is a match of its own; the runs between are non-matches."""
    out: Matches = []
    last = 0
    for i, c in enumerate(text):
        if test(c):
            if last < i:
                out.append((last, i, False))
            out.append((i, i + 1, True))
            last = i + 1
    if last < len(text):
        out.append((last, len(text), False))
    return out


def apply_behavior(matches: Matches, behavior: str) -> list[tuple[int, int]]:
    """The spans kept, as NormalizedString::split computes them."""
    if behavior == "Isolated":
        return [(s, e) for s, e, _ in matches]
    if behavior == "Removed":
        return [(s, e) for s, e, m in matches if not m]
    acc: list[list[int]] = []
    prev = False
    if behavior == "Contiguous":
        for s, e, m in matches:
            if m == prev and acc:
                acc[-1][1] = e
            else:
                acc.append([s, e])
            prev = m
    elif behavior == "MergedWithPrevious":
        for s, e, m in matches:
            if m and not prev and acc:
                acc[-1][1] = e
            else:
                acc.append([s, e])
            prev = m
    elif behavior == "MergedWithNext":
        for s, e, m in reversed(matches):
            if m and not prev and acc:
                acc[-1][0] = s
            else:
                acc.append([s, e])
            prev = m
        acc.reverse()
    else:
        raise Unsupported(f"split behavior {behavior!r}")
    return [(s, e) for s, e in acc]


def _splitter(find: Callable[[str], Matches], behavior: str, invert: bool = False) -> PreTokenizer:
    if behavior not in BEHAVIORS:
        raise Unsupported(f"pre_tokenizer split behavior {behavior!r}")

    def run(pieces: list[Piece]) -> list[Piece]:
        out: list[Piece] = []
        for text, first in pieces:
            matches = find(text)
            if invert:
                matches = [(s, e, not m) for s, e, m in matches]
            out += [(text[s:e], first and s == 0) for s, e in apply_behavior(matches, behavior) if e > s]
        return out
    return run


def _split(spec: Mapping) -> PreTokenizer:
    pattern = spec.get("pattern") or {}
    if "Regex" in pattern:
        try:
            regex = compile_onig(pattern["Regex"])
        except Unsupported as e:
            raise Unsupported(f"pre_tokenizer 'Split': {e}") from None
    elif "String" in pattern:
        regex = compile_literal(pattern["String"])
    else:
        raise Unsupported(f"pre_tokenizer 'Split': pattern {pattern!r}")
    return _splitter(lambda t: regex_matches(regex, t), spec.get("behavior", "Isolated"), bool(spec.get("invert")))


def _byte_level(spec: Mapping) -> PreTokenizer:
    prefix, use_regex = bool(spec.get("add_prefix_space", True)), bool(spec.get("use_regex", True))
    regex = compile_onig(GPT2_PATTERN)

    def run(pieces: list[Piece]) -> list[Piece]:
        out: list[Piece] = []
        for text, first in pieces:
            if not text:
                continue
            if prefix and not text.startswith(" "):
                text = " " + text
            if use_regex:
                out += [(to_byte_level(text[s:e]), first and s == 0) for s, e, _ in regex_matches(regex, text)
                        if e > s]
            else:
                out.append((to_byte_level(text), first))
        return out
    return run


def _metaspace(spec: Mapping) -> PreTokenizer:
    rep = str(spec.get("replacement", "\u2581"))
    if len(rep) != 1:
        raise Unsupported("pre_tokenizer 'Metaspace': replacement must be one character")
    scheme = str(spec.get("prepend_scheme", "always")).lower()
    if spec.get("add_prefix_space") is False:
        scheme = "never"
    if scheme not in ("always", "first", "never"):
        raise Unsupported(f"pre_tokenizer 'Metaspace': prepend_scheme {scheme!r}")
    split = spec.get("split")
    split = True if split is None else bool(split)

    def run(pieces: list[Piece]) -> list[Piece]:
        out: list[Piece] = []
        for text, first in pieces:
            if not text:
                continue
            text = text.replace(" ", rep)
            if not text.startswith(rep) and (scheme == "always" or scheme == "first" and first):
                text = rep + text
            if not split:
                out.append((text, first))
                continue
            spans = apply_behavior(char_matches(lambda c: c == rep, text), "MergedWithNext")
            out += [(text[s:e], first and s == 0) for s, e in spans if e > s]
        return out
    return run


def _punct_test() -> Callable[[str], bool]:
    table = compat()
    return lambda c: table[c] == "punct" if c in table else is_punctuation(c)


_WHITESPACE_RE: list[re.Pattern[str]] = []


def _whitespace(_spec: Mapping) -> PreTokenizer:
    """`\\w+|[^\\w\\s]+` of the regex crate (its \\w, unlike Oniguruma's, holds ZWJ and not ½)."""
    if not _WHITESPACE_RE:
        word = rust_word_class()
        _WHITESPACE_RE.append(re.compile(f"[{word}]+|[^{word}{WHITE_SPACE}]+"))
    regex = _WHITESPACE_RE[0]
    return _splitter(lambda t: regex_matches(regex, t), "Removed", invert=True)


def _whitespace_split(_spec: Mapping) -> PreTokenizer:
    return _splitter(lambda t: char_matches(WHITE_SET.__contains__, t), "Removed")


def _bert(_spec: Mapping) -> PreTokenizer:
    first = _whitespace_split(_spec)
    punct = _punct_test()
    second = _splitter(lambda t: char_matches(punct, t), "Isolated")
    return lambda pieces: second(first(pieces))


def _punctuation(spec: Mapping) -> PreTokenizer:
    punct = _punct_test()
    return _splitter(lambda t: char_matches(punct, t), spec.get("behavior", "Isolated"))


def _digits(spec: Mapping) -> PreTokenizer:
    behavior = "Isolated" if spec.get("individual_digits") else "Contiguous"
    return _splitter(lambda t: char_matches(is_numeric, t), behavior)


def _char_delimiter(spec: Mapping) -> PreTokenizer:
    delim = str(spec["delimiter"])
    return _splitter(lambda t: char_matches(lambda c: c == delim, t), "Removed")


def _fixed_length(spec: Mapping) -> PreTokenizer:
    length = int(spec.get("length", 5))
    if length <= 0:
        raise Unsupported("pre_tokenizer 'FixedLength': length must be positive")

    def run(pieces: list[Piece]) -> list[Piece]:
        return [(text[i:i + length], first and i == 0) for text, first in pieces for i in range(0, len(text), length)]
    return run


def _unicode_scripts(_spec: Mapping) -> PreTokenizer:
    """Cut where the script changes (tokenizers' own table, _scripts.py): Hiragana, Katakana and U+30FC count as
    Han; a space and characters of no listed script (Any) never cut. Text before the first scripted character
    is dropped, as `tokenizers` drops it."""
    from bisect import bisect_right

    from ._scripts import ENDS, NAMES, SCRIPTS, STARTS

    han, as_han = NAMES.index("Han"), {NAMES.index("Hiragana"), NAMES.index("Katakana")}
    seen: dict[str, int] = {" ": -1, "\u30fc": han}

    def script(c: str) -> int:
        s = seen.get(c)
        if s is None:
            o = ord(c)
            i = bisect_right(STARTS, o) - 1
            s = -1 if i < 0 or o > ENDS[i] else SCRIPTS[i]
            s = seen[c] = han if s in as_han else s
        return s

    def run(pieces: list[Piece]) -> list[Piece]:
        out: list[Piece] = []
        for text, first in pieces:
            cuts, last = [], None
            for i, c in enumerate(text):
                s = script(c)
                if s != -1:
                    if s != last:
                        cuts.append(i)
                    last = s
            cuts.append(len(text))
            out += [(text[a:b], first and a == 0) for a, b in zip(cuts, cuts[1:]) if b > a]
        return out
    return run


def _sequence(spec: Mapping) -> PreTokenizer:
    steps = [build(s) for s in spec.get("pretokenizers", [])]

    def run(pieces: list[Piece]) -> list[Piece]:
        for step in steps:
            if step is not None:
                pieces = step(pieces)
        return pieces
    return run


_BUILDERS: dict[str, Callable[[Mapping], PreTokenizer]] = {
    "Split": _split, "ByteLevel": _byte_level, "Metaspace": _metaspace, "Whitespace": _whitespace,
    "WhitespaceSplit": _whitespace_split, "BertPreTokenizer": _bert, "Punctuation": _punctuation, "Digits": _digits,
    "CharDelimiterSplit": _char_delimiter, "FixedLength": _fixed_length, "UnicodeScripts": _unicode_scripts,
    "Sequence": _sequence,
}


def build(spec: Mapping | None) -> PreTokenizer | None:
    if spec is None:
        return None
    kind = spec.get("type")
    if kind not in _BUILDERS:
        raise Unsupported(f"pre_tokenizer {kind!r}")
    return _BUILDERS[kind](spec)


__all__ = ["build", "Piece"]
