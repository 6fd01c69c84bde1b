"""GBNF grammars (llama.cpp's syntax) as a byte-level pushdown automaton.

Syntax: ``name ::= alternatives`` (a rule ends at a newline outside parentheses; after ``::=`` and ``|`` lines may
break), ``"literals"`` and ``[classes]`` (``^`` negates, ranges, ``\\n \\t \\r \\\\ \\" \\xHH \\uHHHH``), ``.``,
rule names, ``( groups )``, ``* + ? {m} {m,} {m,n}``, ``# comments``. Character classes become UTF-8 byte
sequences, so the automaton runs over bytes like the DFA (tokens ending mid-character work the same way).

The automaton's state is the set of parse stacks (frames: an alternative and a position in it; llama.cpp's
approach); its rows are filled lazily and cached (``fill``), so the vocabulary walk of a configuration seen
before costs a dict lookup per byte. Refused with one line: left recursion (also through rules that can match
nothing), a rule that can never finish, undefined rules, a grammar past ``MAX_SYMBOLS`` symbols or a state past
``MAX_STACKS`` stacks; nesting deeper than ``MAX_DEPTH`` frames is not followed (bounded recursion).
"""

from __future__ import annotations

from .automaton import ConstraintError, negate, normalize, utf8_sequences

MAX_TEXT = 100_000
MAX_SYMBOLS = 200_000
MAX_REPEAT = 1000
MAX_DEPTH = 64
MAX_STACKS = 2000
MAX_CONFIGS = 200_000
_ESC = {"n": 10, "t": 9, "r": 13, '"': 34, "\\": 92, "[": 91, "]": 93, "-": 45, "^": 94, "/": 47}


def compile_grammar(text: str, root: str = "root") -> "Pushdown":
    if not isinstance(text, str):
        raise ConstraintError("a grammar must be text")
    if len(text) > MAX_TEXT:
        raise ConstraintError(f"the grammar is longer than {MAX_TEXT} characters")
    g = _Parser(text)
    g.parse()
    if root not in g.names:
        raise ConstraintError(f"grammar: no rule {root!r}")
    for name, idx in g.names.items():
        if idx >= len(g.rules) or g.rules[idx] is None:
            raise ConstraintError(f"grammar: rule {name!r} is used but not defined")
    _check(g.rules, g.rule_names)
    return Pushdown(g.rules, g.names[root])


class _Parser:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.names: dict[str, int] = {}
        self.rule_names: list[str] = []
        self.rules: list[list[tuple] | None] = []  # rule -> alternatives (tuples of symbols)
        self.size = 0

    def error(self, what: str) -> ConstraintError:
        line = self.s.count("\n", 0, self.i) + 1
        return ConstraintError(f"grammar: {what} (line {line})")

    def rule_id(self, name: str) -> int:
        if name not in self.names:
            self.names[name] = len(self.rules)
            self.rule_names.append(name)
            self.rules.append(None)
        return self.names[name]

    def new_rule(self, alts: list[tuple], hint: str) -> int:
        idx = self.rule_id(f"{hint}#{len(self.rules)}")
        self.rules[idx] = alts
        self.size += sum(len(a) for a in alts) + 1
        if self.size > MAX_SYMBOLS:
            raise self.error(f"the grammar is too large (over {MAX_SYMBOLS} symbols once expanded)")
        return idx

    def space(self, newlines: bool) -> None:
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == "#":
                while self.i < len(self.s) and self.s[self.i] != "\n":
                    self.i += 1
            elif c in " \t\r" or (newlines and c == "\n"):
                self.i += 1
            else:
                return

    def name(self) -> str:
        j = self.i
        while j < len(self.s) and (self.s[j].isalnum() or self.s[j] in "-_"):
            j += 1
        if j == self.i:
            raise self.error("expected a rule name")
        out, self.i = self.s[self.i:j], j
        return out

    def parse(self) -> None:
        self.space(True)
        while self.i < len(self.s):
            name = self.name()
            self.space(False)
            if not self.s.startswith("::=", self.i):
                raise self.error(f"expected '::=' after {name!r}")
            self.i += 3
            self.space(True)
            idx = self.rule_id(name)
            if self.rules[idx] is not None:
                raise self.error(f"rule {name!r} is defined twice")
            self.rules[idx] = self.alternatives(False, name)
            self.size += sum(len(a) for a in self.rules[idx])
            if self.i < len(self.s) and self.s[self.i] not in "\n":
                raise self.error(f"unexpected {self.s[self.i]!r}")
            self.space(True)

    def alternatives(self, nested: bool, hint: str) -> list[tuple]:
        alts = [self.sequence(nested, hint)]
        while self.i < len(self.s) and self.s[self.i] == "|":
            self.i += 1
            self.space(True)
            alts.append(self.sequence(nested, hint))
        return alts

    def sequence(self, nested: bool, hint: str) -> tuple:
        out: list[tuple] = []
        while self.i < len(self.s):
            c = self.s[self.i]
            start = len(out)
            if c == '"':
                self.i += 1
                while True:
                    if self.i >= len(self.s):
                        raise self.error("an unterminated string")
                    if self.s[self.i] == '"':
                        self.i += 1
                        break
                    for b in chr(self.char()).encode("utf-8", "surrogatepass"):
                        out.append(("B", b, b))
            elif c == "[":
                out.append(("R", self.char_class(hint)))
            elif c == ".":
                self.i += 1
                out.append(("R", self.ranges_rule([(0, 9), (11, 0x10FFFF)], hint)))
            elif c == "(":
                self.i += 1
                self.space(True)
                alts = self.alternatives(True, hint)
                if self.i >= len(self.s) or self.s[self.i] != ")":
                    raise self.error("a missing ')'")
                self.i += 1
                out.append(("R", self.new_rule(alts, hint)))
            elif c.isalnum() or c in "-_":
                out.append(("R", self.rule_id(self.name())))
            else:
                break
            self.space(nested)
            if self.i < len(self.s) and self.s[self.i] in "*+?{":
                body = tuple(out[start:])
                del out[start:]
                out.append(("R", self.repeat(body, hint)))
                self.space(nested)
        return tuple(out)

    def char(self) -> int:
        c = self.s[self.i]
        self.i += 1
        if c != "\\":
            return ord(c)
        if self.i >= len(self.s):
            raise self.error("a dangling backslash")
        e = self.s[self.i]
        self.i += 1
        if e in _ESC:
            return _ESC[e]
        n = {"x": 2, "u": 4, "U": 8}.get(e)
        if n is None:
            raise self.error(f"unknown escape \\{e}")
        digits = self.s[self.i:self.i + n]
        try:
            cp = int(digits, 16)
        except ValueError:
            raise self.error(f"\\{e} needs {n} hex digits") from None
        self.i += n
        if len(digits) != n or cp > 0x10FFFF:
            raise self.error(f"\\{e} needs {n} hex digits of a code point")
        return cp

    def char_class(self, hint: str) -> int:
        self.i += 1
        neg = self.i < len(self.s) and self.s[self.i] == "^"
        if neg:
            self.i += 1
        ranges = []
        while True:
            if self.i >= len(self.s):
                raise self.error("an unterminated character class")
            if self.s[self.i] == "]":
                self.i += 1
                break
            lo = self.char()
            hi = lo
            if self.s.startswith("-", self.i) and self.i + 1 < len(self.s) and self.s[self.i + 1] != "]":
                self.i += 1
                hi = self.char()
            if hi < lo:
                raise self.error("a bad range in a character class")
            ranges.append((lo, hi))
        ranges = negate(ranges) if neg else normalize(ranges)
        if not ranges:
            raise self.error("an empty character class")
        return self.ranges_rule(ranges, hint)

    def ranges_rule(self, ranges, hint: str) -> int:
        alts = []
        for lo, hi in ranges:
            alts += [tuple(("B", a, b) for a, b in seqs) for seqs in utf8_sequences(lo, hi)]
        return self.new_rule(alts, hint)

    def repeat(self, body: tuple, hint: str) -> int:
        c = self.s[self.i]
        self.i += 1
        if c == "{":
            j = self.s.find("}", self.i)
            text = self.s[self.i:j] if j > 0 else ""
            try:
                parts = [p.strip() for p in text.split(",")]
                lo = int(parts[0] or 0)
                hi = lo if len(parts) == 1 else (int(parts[1]) if parts[1] else None)
            except (ValueError, IndexError):
                raise self.error("a bad {m,n} repeat") from None
            if len(parts) > 2 or lo > MAX_REPEAT or (hi is not None and (hi > MAX_REPEAT or hi < lo)):
                raise self.error(f"a bad {{m,n}} repeat (counts up to {MAX_REPEAT}, m <= n)")
            self.i = j + 1
        else:
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
        if hi is None:
            star = self.rule_id(f"{hint}#{len(self.rules)}")
            self.rules[star] = [body + (("R", star),), ()]
            tail: tuple = (("R", star),)
        else:
            tail = ()
            for _ in range(hi - lo):  # nested optionals: x (x (x)?)?
                tail = (("R", self.new_rule([body + tail, ()], hint)),)
        return self.new_rule([body * lo + tail], hint)


def _check(rules: list[list[tuple]], names: list[str]) -> None:
    nullable = [False] * len(rules)
    productive = [False] * len(rules)
    changed = True
    while changed:
        changed = False
        for r, alts in enumerate(rules):
            if not nullable[r] and any(all(s[0] == "R" and nullable[s[1]] for s in a) for a in alts):
                nullable[r] = changed = True
            if not productive[r] and any(all(s[0] == "B" or productive[s[1]] for s in a) for a in alts):
                productive[r] = changed = True
    for r in range(len(rules)):
        if not productive[r]:
            raise ConstraintError(f"grammar: rule {names[r].split('#')[0]!r} can never finish")
    first = [set() for _ in rules]  # rules reachable at the left edge without consuming a byte
    for r, alts in enumerate(rules):
        for a in alts:
            for s in a:
                if s[0] == "B":
                    break
                first[r].add(s[1])
                if not nullable[s[1]]:
                    break
    state = [0] * len(rules)  # 0 new, 1 on the path, 2 done
    for r0 in range(len(rules)):
        if state[r0]:
            continue
        todo = [(r0, iter(first[r0]))]
        state[r0] = 1
        while todo:
            r, it = todo[-1]
            nxt = next(it, None)
            if nxt is None:
                state[r] = 2
                todo.pop()
            elif state[nxt] == 1:
                raise ConstraintError(f"grammar: rule {names[nxt].split('#')[0]!r} is left-recursive "
                                      "(rewrite it with a repeat)")
            elif state[nxt] == 0:
                state[nxt] = 1
                todo.append((nxt, iter(first[nxt])))


class Pushdown:
    """The grammar's automaton over bytes, with the DFA's interface (``rows``, ``fill``, ``accepting``)."""

    start = 0

    def __init__(self, rules: list[list[tuple]], root: int) -> None:
        self.alts: list[tuple] = []
        self.rule_alts: list[list[int]] = []
        for alts in rules:
            self.rule_alts.append(list(range(len(self.alts), len(self.alts) + len(alts))))
            self.alts += alts
        self.configs: list[frozenset] = []
        self.index: dict[frozenset, int] = {}
        self.rows: list[list[int]] = []
        self.accept: list[bool] = []
        out: set = set()
        for a in self.rule_alts[root]:
            self._expand(((a, 0),) if self.alts[a] else (), out)
        if not out:
            raise ConstraintError("grammar: the root rule matches nothing")
        self._intern(frozenset(out))

    def _intern(self, config: frozenset) -> int:
        j = self.index.get(config)
        if j is None:
            if len(self.configs) >= MAX_CONFIGS:
                raise ConstraintError(f"grammar: more than {MAX_CONFIGS} parser states (too ambiguous)")
            if len(config) > MAX_STACKS:
                raise ConstraintError(f"grammar: more than {MAX_STACKS} parses at once (too ambiguous)")
            j = self.index[config] = len(self.configs)
            self.configs.append(config)
            self.rows.append([-2] * 256)
            self.accept.append(() in config)
        return j

    def _expand(self, stack: tuple, out: set) -> None:
        """Add the stacks ``stack`` leads to whose top expects a byte (or the empty stack: accepted)."""
        if not stack:
            out.add(stack)
            return
        a, p = stack[-1]
        sym = self.alts[a][p]
        if sym[0] == "B":
            out.add(stack)
            return
        rest = stack[:-1] + (((a, p + 1),) if p + 1 < len(self.alts[a]) else ())
        if len(rest) >= MAX_DEPTH:
            return
        for b in self.rule_alts[sym[1]]:
            self._expand(rest + ((b, 0),) if self.alts[b] else rest, out)

    def fill(self, state: int, byte: int) -> int:
        out: set = set()
        for stack in self.configs[state]:
            if not stack:
                continue
            a, p = stack[-1]
            _, lo, hi = self.alts[a][p]
            if lo <= byte <= hi:
                self._expand(stack[:-1] + (((a, p + 1),) if p + 1 < len(self.alts[a]) else ()), out)
        t = self._intern(frozenset(out)) if out else -1
        self.rows[state][byte] = t
        return t

    def step(self, state: int, byte: int) -> int:
        t = self.rows[state][byte]
        return self.fill(state, byte) if t == -2 else t

    def accepting(self, state: int) -> bool:
        return self.accept[state]
