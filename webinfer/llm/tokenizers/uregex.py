"""Oniguruma patterns of tokenizer.json run on Python's `re`, and the Unicode character tests `tokenizers` uses.

`tokenizers` compiles Split / Replace patterns with Oniguruma, which knows \\p{L}, \\p{N}, \\p{Lu}... and whose
\\s, \\w and \\d are Unicode properties. Python's `re` has no \\p{..}, and its \\s / \\w differ (\\s also matches
U+001C..U+001F, \\w misses combining marks), so patterns are rewritten with explicit character classes built
once from `unicodedata` (one scan of the planes that hold assigned characters, then cached per process).
"""

from __future__ import annotations

import itertools
import re
import unicodedata

from .errors import Unsupported

# Unicode White_Space: Oniguruma's \s, Rust's char::is_whitespace and the regex crate's \s.
WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
              "\u2028\u2029\u202f\u205f\u3000"
WHITE_SET = frozenset(WHITE_SPACE)
_RANGES: dict[str, list[tuple[int, int]]] = {}
_COMPILED: dict[tuple[str, int], re.Pattern[str]] = {}
_MAX = 0x10FFFF


def category_ranges() -> dict[str, list[tuple[int, int]]]:
    """General category (two letters) -> sorted code point ranges, for all of Unicode."""
    if not _RANGES:
        spans: dict[str, list[list[int]]] = {}
        category = unicodedata.category
        # Planes 4-13 are unassigned and 15-16 private use: scanning only 0-3 and 14 is 3x cheaper (Pyodide).
        # Runs of one category found by groupby over map (C loops): half the time of a Python loop per code
        # point, which was most of a BPE tokenizer's start in the page (page_cpu.py).
        for lo, hi in ((0, 0x40000), (0xE0000, 0xF0000)):
            at = lo
            for cat, run in itertools.groupby(map(category, map(chr, range(lo, hi)))):
                n = len(list(run))
                spans.setdefault(cat, []).append([at, at + n - 1])
                at += n
        spans.setdefault("Cn", []).append([0x40000, 0xDFFFF])
        spans.setdefault("Co", []).extend([[0xF0000, 0xFFFFD], [0x100000, 0x10FFFD]])
        spans["Cn"] += [[0xFFFFE, 0xFFFFF], [0x10FFFE, 0x10FFFF]]
        for cat, lst in spans.items():
            _RANGES[cat] = sorted((a, b) for a, b in lst)
    return _RANGES


def _union(*groups: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(itertools.chain(*groups)):
        if out and a <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _complement(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out, at = [], 0
    for a, b in _union(ranges):
        if a > at:
            out.append((at, a - 1))
        at = b + 1
    if at <= _MAX:
        out.append((at, _MAX))
    return out


_LONG = {"letter": "L", "mark": "M", "number": "N", "punctuation": "P", "symbol": "S", "separator": "Z",
         "other": "C", "uppercase_letter": "Lu", "lowercase_letter": "Ll", "decimal_number": "Nd"}


def property_ranges(name: str) -> list[tuple[int, int]]:
    """\\p{name}: a general category (L, Lu, N, ...) or one of the few binary properties patterns use."""
    cats = category_ranges()
    key = name.replace(" ", "").replace("-", "_")
    key = _LONG.get(key.lower(), key)
    if key in ("L&", "LC"):
        return _union(cats.get("Lu", []), cats.get("Ll", []), cats.get("Lt", []))
    if len(key) == 1 and key in "LMNPSZC":
        return _union(*(r for c, r in cats.items() if c[0] == key))
    if len(key) == 2 and key in cats or key in ("Cs", "Co", "Cn", "Zl", "Zp", "Lt", "Me", "Pc", "Nl"):
        return list(cats.get(key, []))
    if key.lower() in ("white_space", "space"):
        return _union([(ord(c), ord(c)) for c in WHITE_SPACE])
    if key.lower() in ("any",):
        return [(0, _MAX)]
    raise Unsupported(f"regex property \\p{{{name}}}")


def _ws() -> list[tuple[int, int]]:
    return _union([(ord(c), ord(c)) for c in WHITE_SPACE])


def _word() -> list[tuple[int, int]]:
    """Oniguruma's \\w: Alphabetic (letters, Nl, a few So), marks, Nd, Pc (no Join_Control, unlike the regex crate)."""
    cats = category_ranges()
    alphabetic_symbols = [(0x24B6, 0x24E9), (0x1F130, 0x1F149), (0x1F150, 0x1F169), (0x1F170, 0x1F189)]
    latin1_numbers = [(0xB2, 0xB3), (0xB9, 0xB9), (0xBC, 0xBE)]  # Oniguruma's Latin-1 table counts ¹²³¼½¾ as word
    return _union(*(r for c, r in cats.items() if c[0] in "LM" or c in ("Nd", "Nl", "Pc")), alphabetic_symbols,
                  latin1_numbers)


def rust_word_class() -> str:
    """The regex crate's \\w as a class body: Alphabetic, marks, Nd, Pc and Join_Control (ZWNJ, ZWJ)."""
    cats = category_ranges()
    alphabetic_symbols = [(0x24B6, 0x24E9), (0x1F130, 0x1F149), (0x1F150, 0x1F169), (0x1F170, 0x1F189)]
    return _escape_class(_union(*(r for c, r in cats.items() if c[0] in "LM" or c in ("Nd", "Nl", "Pc")),
                                alphabetic_symbols, [(0x200C, 0x200D)]))


def _escape_class(ranges: list[tuple[int, int]]) -> str:
    return "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges)


_SHORTHAND = {"s": _ws, "w": _word, "d": lambda: list(category_ranges().get("Nd", [])),
              "h": lambda: [(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)]}


def _class_escape(pattern: str, i: int) -> tuple[list[tuple[int, int]] | None, int]:
    """At a backslash: (ranges, next index) for \\p{..} \\P{..} \\s \\S \\w \\W \\d \\D \\h \\H, else (None, i)."""
    c = pattern[i + 1] if i + 1 < len(pattern) else ""
    if c in "pP" and pattern.startswith("{", i + 2):
        end = pattern.find("}", i + 3)
        if end < 0:
            raise Unsupported(f"regex {pattern!r}: unterminated \\{c}{{")
        name, negate = pattern[i + 3:end], c == "P"
        if name.startswith("^"):
            name, negate = name[1:], not negate
        ranges = property_ranges(name)
        return (_complement(ranges) if negate else ranges), end + 1
    if c.lower() in _SHORTHAND:
        ranges = _SHORTHAND[c.lower()]()
        return (_complement(ranges) if c.isupper() else ranges), i + 2
    return None, i


def translate(pattern: str) -> str:
    """An Oniguruma (Ruby syntax) pattern as a Python `re` pattern with the same matches."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            ranges, j = _class_escape(pattern, i)
            if ranges is not None:
                out.append(f"[{_escape_class(ranges)}]")
                i = j
                continue
            nxt = pattern[i + 1:i + 2]
            if nxt == "z":
                out.append(r"\Z")
            elif nxt == "Z":
                out.append(r"(?=\n?\Z)")
            elif nxt in ("b", "B", "G", "K", "R", "X", "k", "g") or nxt.isdigit() and nxt != "0":
                raise Unsupported(f"regex {pattern!r}: \\{nxt}")
            elif nxt == "x" and pattern.startswith("{", i + 2):
                end = pattern.index("}", i + 3)
                out.append(f"\\U{int(pattern[i + 3:end], 16):08x}")
                i = end + 1
                continue
            else:
                out.append(pattern[i:i + 2])
            i += 2
        elif c == "[":
            i = _translate_class(pattern, i, out)
        elif c == "(" and pattern.startswith("(?<", i) and pattern[i + 3:i + 4] not in ("=", "!"):
            out.append("(?P<")
            i += 3
        elif c == "(" and pattern.startswith("(?", i) and pattern[i + 2:i + 3] not in (":", "=", "!", "<", ">", "i",
                                                                                      "m", "x", "-"):
            raise Unsupported(f"regex {pattern!r}: group {pattern[i:i + 3]!r}")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _translate_class(pattern: str, i: int, out: list[str]) -> int:
    """Copy one [...] class starting at `i` (escapes rewritten); returns the index after it."""
    body: list[str] = []
    j = i + 1
    if pattern.startswith("^", j):
        body.append("^")
        j += 1
    if pattern.startswith("]", j):
        body.append("\\]")
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        c = pattern[j]
        if c == "[" or pattern.startswith("&&", j):
            raise Unsupported(f"regex {pattern!r}: nested character classes")
        if c == "\\":
            ranges, k = _class_escape(pattern, j)
            if ranges is not None:
                body.append(_escape_class(ranges))
                j = k
                continue
            if pattern.startswith("x{", j + 1):
                end = pattern.index("}", j + 3)
                body.append(f"\\U{int(pattern[j + 3:end], 16):08x}")
                j = end + 1
                continue
            body.append(pattern[j:j + 2])
            j += 2
        else:
            body.append(c)
            j += 1
    if j >= len(pattern):
        raise Unsupported(f"regex {pattern!r}: unterminated character class")
    out.append("[" + "".join(body) + "]")
    return j + 1


def compile_onig(pattern: str) -> re.Pattern[str]:
    """Compile once per process (Llama 3's pattern costs ~0.1 s natively)."""
    key = (pattern, 0)
    compiled = _COMPILED.get(key)
    if compiled is None:
        try:
            compiled = re.compile(translate(pattern), re.M)
        except re.error as e:
            raise Unsupported(f"regex {pattern!r} ({e})") from None
        _COMPILED[key] = compiled
    return compiled


def compile_literal(text: str) -> re.Pattern[str]:
    return re.compile(re.escape(text))


# -- character tests (Rust std / unicode_categories / regex crate, from this Python's Unicode tables) -----------
def is_whitespace(c: str) -> bool:
    return c in WHITE_SET


def is_numeric(c: str) -> bool:
    """Rust's char::is_numeric: general category N*."""
    return unicodedata.category(c)[0] == "N"


def is_punctuation(c: str) -> bool:
    """ASCII punctuation (which includes symbols such as $ + < = > ^ ` | ~) or category P*."""
    return c in _ASCII_PUNCT or unicodedata.category(c)[0] == "P"


def is_word_char(c: str) -> bool:
    """Unicode \\w (regex crate, Oniguruma): Alphabetic, marks, decimal digits, connector punctuation, ZWJ/ZWNJ."""
    cat, o = unicodedata.category(c), ord(c)
    return (cat[0] in "LM" or cat in ("Nd", "Nl", "Pc") or c in "\u200c\u200d" or 0x24B6 <= o <= 0x24E9
            or 0x1F130 <= o <= 0x1F189 and not 0x1F14A <= o <= 0x1F14F and not 0x1F16A <= o <= 0x1F16F)


_ASCII_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


# -- extended grapheme clusters (enough of UAX #29 for clusters shorter than 6 UTF-8 bytes) ----------------------
_EXTEND_EXTRA = frozenset("\u200c\u200d\uff9e\uff9f\u0e33\u0eb3")
_PREPEND = frozenset(chr(c) for c in (*range(0x600, 0x606), 0x6DD, 0x70F, 0x890, 0x891, 0x8E2, 0xD4E, 0x110BD,
                                      0x110CD))


def _extends(c: str) -> bool:
    cat = unicodedata.category(c)
    return cat[0] == "M" or c in _EXTEND_EXTRA or 0x1F3FB <= ord(c) <= 0x1F3FF or 0xE0020 <= ord(c) <= 0xE007F


def _is_control(c: str) -> bool:
    return c not in "\u200c\u200d" and unicodedata.category(c) in ("Cc", "Zl", "Zp", "Cf") and c not in _PREPEND


def graphemes(text: str) -> list[str]:
    """Grapheme clusters: CR LF, a base with its following marks / ZWJ / variation selectors, prepend + base.
    Controls stand alone. (Hangul, emoji-ZWJ and flag sequences are 6+ bytes, which Precompiled takes char by char.)"""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        j = i + 1
        if c == "\r":
            if j < n and text[j] == "\n":
                j += 1
        elif not _is_control(c):
            while c in _PREPEND and j < n and not _is_control(text[j]):
                c = text[j]
                j += 1
            while j < n and _extends(text[j]):
                j += 1
        out.append(text[i:j])
        i = j
    return out
