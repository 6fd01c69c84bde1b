"""A safe subset of Python's regular expressions, parsed into automaton.py's expression tree.

Supported: literals and escapes (``\\n \\t \\xHH \\uHHHH``, escaped punctuation), ``.`` (any character but a
newline), classes ``[a-z_]`` / ``[^"]`` with ``\\d \\w \\s`` (ASCII: what they match is a subset of Python's
Unicode classes, so every output still satisfies ``re.fullmatch``; ``\\D \\W \\S`` are ASCII too), groups
``(...)``, ``(?:...)``, ``(?P<name>...)``, alternation, ``* + ? {n} {n,} {n,m}`` (a lazy ``?`` after them
changes nothing here). The pattern is matched whole: ``^`` at its start and ``$`` at its end are allowed and
change nothing. Refused with one line: backreferences, lookarounds, word boundaries, inline flags, repeats
over ``MAX_REPEAT`` and nesting deeper than ``MAX_DEPTH``.
"""

from __future__ import annotations

from .automaton import ConstraintError, alt, chars, negate, normalize, rep, seq

MAX_REPEAT = 1000
MAX_DEPTH = 64
MAX_PATTERN = 10_000

DIGIT = [(48, 57)]
WORD = [(48, 57), (65, 90), (95, 95), (97, 122)]
SPACE = [(9, 13), (32, 32)]
_CLASS_ESCAPES = {
    "d": DIGIT, "w": WORD, "s": SPACE,
    "D": [(lo, min(hi, 127)) for lo, hi in negate(DIGIT) if lo < 128],
    "W": [(lo, min(hi, 127)) for lo, hi in negate(WORD) if lo < 128],
    "S": [(lo, min(hi, 127)) for lo, hi in negate(SPACE + [(0x1C, 0x1F)]) if lo < 128],  # re's \s has those
}
_CHAR_ESCAPES = {"n": 10, "t": 9, "r": 13, "f": 12, "v": 11, "a": 7, "0": 0}


def parse_regex(pattern: str) -> tuple:
    """The expression tree of ``pattern`` (whole-string match), or ConstraintError."""
    if not isinstance(pattern, str):
        raise ConstraintError("a regular expression must be a string")
    if len(pattern) > MAX_PATTERN:
        raise ConstraintError(f"the regular expression is longer than {MAX_PATTERN} characters")
    p = _Parser(pattern)
    if p.peek() == "^":
        p.i += 1
    expr = p.alternation(0)
    if p.peek() == "$" and p.i == len(pattern) - 1:
        p.i += 1
    if p.i != len(pattern):
        raise p.error("unexpected character")
    return expr


class _Parser:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def error(self, what: str) -> ConstraintError:
        return ConstraintError(f"regular expression: {what} at position {self.i} of {self.s[:60]!r}")

    def peek(self) -> str | None:
        return self.s[self.i] if self.i < len(self.s) else None

    def take(self) -> str:
        if self.i >= len(self.s):
            raise self.error("unexpected end")
        c = self.s[self.i]
        self.i += 1
        return c

    def alternation(self, depth: int) -> tuple:
        if depth > MAX_DEPTH:
            raise self.error(f"groups nested deeper than {MAX_DEPTH}")
        branches = [self.sequence(depth)]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.sequence(depth))
        return branches[0] if len(branches) == 1 else alt(*branches)

    def sequence(self, depth: int) -> tuple:
        parts = []
        while self.peek() not in (None, "|", ")"):
            if self.peek() == "$" and self.i == len(self.s) - 1:
                break
            parts.append(self.repeat(self.atom(depth)))
        return parts[0] if len(parts) == 1 else seq(*parts)

    def repeat(self, atom: tuple) -> tuple:
        while True:
            c = self.peek()
            if c == "*":
                lo, hi = 0, None
            elif c == "+":
                lo, hi = 1, None
            elif c == "?":
                lo, hi = 0, 1
            elif c == "{" and self._is_counted():
                lo, hi = self._counts()
                atom = rep(atom, lo, hi)
                self._lazy()
                continue
            else:
                return atom
            self.i += 1
            atom = rep(atom, lo, hi)
            self._lazy()

    def _lazy(self) -> None:
        if self.peek() == "?":
            self.i += 1
        if self.peek() in ("*", "+", "?") and self.s[self.i - 1] in "*+?}":
            raise self.error("a repeat of a repeat (possessive or doubled quantifier)")

    def _is_counted(self) -> bool:
        j = self.s.find("}", self.i)
        body = self.s[self.i + 1:j] if j > 0 else ""
        return bool(body) and all(ch.isdigit() or ch == "," for ch in body) and body.count(",") <= 1 \
            and body != ","

    def _counts(self) -> tuple[int, int | None]:
        j = self.s.index("}", self.i)
        body = self.s[self.i + 1:j]
        self.i = j + 1
        if "," in body:
            a, b = body.split(",")
            lo, hi = int(a or 0), (int(b) if b else None)
        else:
            lo = hi = int(body)
        if lo > MAX_REPEAT or (hi is not None and hi > MAX_REPEAT):
            raise self.error(f"a repeat count over {MAX_REPEAT}")
        if hi is not None and hi < lo:
            raise self.error("a repeat {n,m} with m < n")
        return lo, hi

    def atom(self, depth: int) -> tuple:
        c = self.take()
        if c == "(":
            if self.peek() == "?":
                self.i += 1
                kind = self.take()
                if kind == ":":
                    pass
                elif kind == "P" and self.peek() == "<" or kind == "<" and self.peek() not in ("=", "!"):
                    j = self.s.find(">", self.i)
                    if j < 0:
                        raise self.error("an unterminated group name")
                    self.i = j + 1
                else:
                    raise self.error("lookarounds, inline flags and other (?...) groups are not supported")
            inner = self.alternation(depth + 1)
            if self.take() != ")":
                raise self.error("a missing ')'")
            return inner
        if c == "[":
            return self.char_class()
        if c == ".":
            return chars((0, 9), (11, 0x10FFFF))
        if c == "\\":
            return chars(*self.escape(in_class=False))
        if c in "*+?":
            raise self.error(f"nothing to repeat before {c!r}")
        if c in "^$":
            raise self.error(f"{c!r} is only allowed at the start/end (the whole text is matched)")
        if c == ")":
            raise self.error("an unbalanced ')'")
        return chars((ord(c), ord(c)))

    def escape(self, in_class: bool) -> list[tuple[int, int]]:
        c = self.take()
        if c in _CLASS_ESCAPES:
            return list(_CLASS_ESCAPES[c])
        if c in _CHAR_ESCAPES:
            return [(_CHAR_ESCAPES[c],) * 2]
        if c in "xuU":
            n = {"x": 2, "u": 4, "U": 8}[c]
            digits = self.s[self.i:self.i + n]
            if len(digits) != n or any(ch not in "0123456789abcdefABCDEF" for ch in digits):
                raise self.error(f"\\{c} needs {n} hex digits")
            self.i += n
            cp = int(digits, 16)
            if cp > 0x10FFFF:
                raise self.error("a code point past U+10FFFF")
            return [(cp, cp)]
        if c == "b" and in_class:
            return [(8, 8)]
        if c.isalnum():
            raise self.error(f"\\{c} (backreferences, boundaries and other escapes) is not supported")
        return [(ord(c), ord(c))]

    def char_class(self) -> tuple:
        neg = self.peek() == "^"
        if neg:
            self.i += 1
        ranges: list[tuple[int, int]] = []
        first = True
        while True:
            c = self.take()
            if c == "]" and not first:
                break
            first = False
            if c == "\\":
                got = self.escape(in_class=True)
            elif c == "[" and self.peek() == ":":
                raise self.error("POSIX classes [:name:] are not supported")
            else:
                got = [(ord(c), ord(c))]
            if len(got) == 1 and got[0][0] == got[0][1] and self.peek() == "-" and \
                    self.i + 1 < len(self.s) and self.s[self.i + 1] != "]":
                self.i += 1
                d = self.take()
                hi = self.escape(in_class=True) if d == "\\" else [(ord(d), ord(d))]
                if len(hi) != 1 or hi[0][0] != hi[0][1] or hi[0][0] < got[0][0]:
                    raise self.error("a bad range in a character class")
                got = [(got[0][0], hi[0][0])]
            ranges += got
        ranges = negate(ranges) if neg else normalize(ranges)
        if not ranges:
            raise self.error("an empty character class")
        return chars(*ranges)
