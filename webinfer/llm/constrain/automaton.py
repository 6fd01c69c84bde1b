"""Regular expressions as a byte-level DFA, with budgets so a pathological pattern is refused, never a hang.

An expression is a small tree of tuples (built by regex.py from a pattern, by schema.py from a JSON Schema):
``("chars", ranges)`` one code point from sorted inclusive ranges, ``("seq", parts)``, ``("alt", parts)``,
``("rep", part, lo, hi)`` (hi None: unbounded). Code point ranges are compiled to UTF-8 byte sequences, so
the automaton runs over bytes: a byte-level BPE token that ends in the middle of a character leaves it in an
intermediate state that only the character's remaining bytes continue. Thompson NFA, then subset
construction over byte classes; states from which no accepting state can be reached are removed, so every
live state can still complete (a token mask never leads into a dead end).

Budgets: NFA size (``MAX_NFA``, repeats are expanded), DFA states (``MAX_STATES``) and the work of the subset
construction (``MAX_WORK``), each refused with one line (``ConstraintError``) well under a second here.
"""

from __future__ import annotations

from ...errors import WebinferError

MAX_NFA = 200_000
MAX_STATES = 20_000
MAX_WORK = 3_000_000
MAX_CODE = 0x10FFFF

EMPTY = ("seq", ())
NEVER = ("alt", ())


class ConstraintError(WebinferError):
    """A constraint that cannot be compiled (unsupported, malformed or too large)."""


def chars(*ranges) -> tuple:
    return ("chars", tuple(normalize(ranges)))


def lit(text: str) -> tuple:
    return ("seq", tuple(("chars", ((ord(c), ord(c)),)) for c in text))


def seq(*parts) -> tuple:
    return ("seq", tuple(parts))


def alt(*parts) -> tuple:
    return ("alt", tuple(parts))


def rep(part, lo: int, hi: int | None) -> tuple:
    return ("rep", part, lo, hi)


def opt(part) -> tuple:
    return ("rep", part, 0, 1)


def normalize(ranges) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for lo, hi in sorted((int(a), int(b)) for a, b in ranges if a <= b):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(a, b) for a, b in out]


def negate(ranges) -> list[tuple[int, int]]:
    out, nxt = [], 0
    for lo, hi in normalize(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODE:
        out.append((nxt, MAX_CODE))
    return out


def intersect(a, b) -> list[tuple[int, int]]:
    out = []
    for lo, hi in normalize(a):
        for lo2, hi2 in normalize(b):
            if max(lo, lo2) <= min(hi, hi2):
                out.append((max(lo, lo2), min(hi, hi2)))
    return normalize(out)


def _encode(cp: int) -> bytes:
    return chr(cp).encode("utf-8", "surrogatepass")


def utf8_sequences(lo: int, hi: int) -> list[list[tuple[int, int]]]:
    """Byte-range sequences matching exactly the UTF-8 encodings of code points lo..hi (surrogates left out)."""
    out, todo = [], [(lo, hi)]
    while todo:
        lo, hi = todo.pop()
        if lo > hi:
            continue
        if lo <= 0xDFFF and hi >= 0xD800:
            todo += [(lo, 0xD7FF), (0xE000, hi)]
            continue
        split = next((m for m in (0x7F, 0x7FF, 0xFFFF) if lo <= m < hi), None)
        if split is not None:
            todo += [(lo, split), (split + 1, hi)]
            continue
        if hi <= 0x7F:
            out.append([(lo, hi)])
            continue
        for i in range(1, len(_encode(lo))):
            m = (1 << (6 * i)) - 1
            if lo & ~m != hi & ~m:
                if lo & m:
                    todo += [(lo, lo | m), ((lo | m) + 1, hi)]
                    break
                if hi & m != m:
                    todo += [(lo, (hi & ~m) - 1), (hi & ~m, hi)]
                    break
        else:
            out.append(list(zip(_encode(lo), _encode(hi))))
    return out


class _NFA:
    def __init__(self) -> None:
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []

    def node(self) -> int:
        if len(self.eps) >= MAX_NFA:
            raise ConstraintError(f"the constraint is too large (over {MAX_NFA} automaton nodes; bound its "
                                  "repeats or simplify it)")
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def build(self, expr, start: int) -> int:
        """Add ``expr`` from ``start``; return its end node."""
        kind = expr[0]
        if kind == "chars":
            end = self.node()
            for lo, hi in expr[1]:
                for byte_ranges in utf8_sequences(lo, hi):
                    cur = start
                    for i, (blo, bhi) in enumerate(byte_ranges):
                        nxt = end if i == len(byte_ranges) - 1 else self.node()
                        self.edges[cur].append((blo, bhi, nxt))
                        cur = nxt
            return end
        if kind == "bytes":
            end = self.node()
            for blo, bhi in expr[1]:
                self.edges[start].append((blo, bhi, end))
            return end
        if kind == "seq":
            for part in expr[1]:
                start = self.build(part, start)
            return start
        if kind == "alt":
            end = self.node()
            for part in expr[1]:
                s = self.node()
                self.eps[start].append(s)
                self.eps[self.build(part, s)].append(end)
            return end
        if kind == "rep":
            _, part, lo, hi = expr
            for _ in range(lo):
                start = self.build(part, start)
            if hi is None:
                loop, end = self.node(), self.node()
                self.eps[start] += [loop, end]
                self.eps[self.build(part, loop)] += [loop, end]
                return end
            end = self.node()
            for _ in range(hi - lo):
                self.eps[start].append(end)
                start = self.build(part, start)
            self.eps[start].append(end)
            return end
        raise ConstraintError(f"internal error: unknown expression {kind!r}")


def expanded_size(expr, memo: dict | None = None) -> int:
    """About how many NFA nodes ``expr`` builds (repeats multiplied out), computed without building them."""
    memo = {} if memo is None else memo
    key = id(expr)
    if key in memo:
        return memo[key]
    kind = expr[0]
    if kind in ("chars", "bytes"):
        n = 1 + 3 * len(expr[1])
    elif kind in ("seq", "alt"):
        n = 1 + sum(expanded_size(p, memo) for p in expr[1]) + (len(expr[1]) if kind == "alt" else 0)
    else:
        _, part, lo, hi = expr
        n = 2 + expanded_size(part, memo) * (max(lo, 1) if hi is None else max(hi, 1))
    memo[key] = n = min(n, 1 << 40)
    return n


class DFA:
    """A byte-level DFA: ``rows[s][byte]`` is the next state or -1; ``accept[s]``; ``start`` is 0."""

    start = 0

    def __init__(self, rows: list[list[int]], accept: list[bool], reps: list[int] | None = None) -> None:
        self.rows = rows
        self.accept = accept
        self.reps = reps if reps is not None else list(range(256))  # one byte per alphabet class
        self._short: list[int] | None = None

    def short_classes(self, depth: int) -> list[int]:
        """States numbered so that two with one number lead every byte string of at most ``depth`` bytes to
        live states alike (Moore's refinement stopped after ``depth`` rounds): their masks over tokens that
        short are equal, so it is walked once. Identity when refining would cost more than walking."""
        if self._short is None:
            n = len(self.rows)
            if n * len(self.reps) * depth > MAX_WORK:
                self._short = list(range(n))
                return self._short
            reduced = [[self.rows[s][b] for b in self.reps] for s in range(n)]
            cls = [0] * n + [-1]  # cls[-1]: the dead state's class
            count = 1
            for _ in range(depth):
                sig: dict[tuple, int] = {}
                new = [sig.setdefault((cls[s], *map(cls.__getitem__, reduced[s])), len(sig)) for s in range(n)]
                cls = new + [-1]
                if len(sig) == count:
                    break
                count = len(sig)
            cls.pop()
            self._short = cls
        return self._short

    def step(self, state: int, byte: int) -> int:
        return self.rows[state][byte]

    fill = step  # every row is complete (the pushdown automaton fills its rows lazily)

    def accepting(self, state: int) -> bool:
        return self.accept[state]

    def walk(self, state: int, data: bytes) -> int:
        for b in data:
            if state < 0:
                return -1
            state = self.rows[state][b]
        return state

    def matches(self, data: bytes) -> bool:
        s = self.walk(0, data)
        return s >= 0 and self.accept[s]


def compile_dfa(expr) -> DFA:
    """The minimal-enough DFA of ``expr`` (subset construction, dead states trimmed), or ConstraintError."""
    if expanded_size(expr) > MAX_NFA:
        raise ConstraintError(f"the constraint is too large (over {MAX_NFA} automaton nodes once its repeats "
                              "are expanded; bound them or simplify it)")
    nfa = _NFA()
    start = nfa.node()
    final = nfa.build(expr, start)
    bounds = {0, 256}
    for edges in nfa.edges:
        for lo, hi, _ in edges:
            bounds.add(lo)
            bounds.add(hi + 1)
    cuts = sorted(bounds)
    class_of = [0] * 256
    for c, (a, b) in enumerate(zip(cuts, cuts[1:])):
        for x in range(a, b):
            class_of[x] = c
    reps = cuts[:-1]
    closure_memo: dict[int, frozenset] = {}

    def closure(node: int) -> frozenset:
        got = closure_memo.get(node)
        if got is None:
            seen, todo = {node}, [node]
            while todo:
                for n in nfa.eps[todo.pop()]:
                    if n not in seen:
                        seen.add(n)
                        todo.append(n)
            got = closure_memo[node] = frozenset(seen)
        return got

    first = closure(start)
    index = {first: 0}
    sets, table = [first], []
    work = 0
    i = 0
    while i < len(sets):
        cur = sets[i]
        moves: dict[int, set[int]] = {}
        for n in cur:
            for lo, hi, to in nfa.edges[n]:
                cl = closure(to)
                for c in range(class_of[lo], class_of[hi] + 1):
                    moves.setdefault(c, set()).update(cl)
                work += len(cl) * (class_of[hi] - class_of[lo] + 1)
        row = []
        for c in range(len(reps)):
            nxt = moves.get(c)
            if not nxt:
                row.append(-1)
                continue
            key = frozenset(nxt)
            j = index.get(key)
            if j is None:
                if len(sets) >= MAX_STATES:
                    raise ConstraintError(f"the constraint needs more than {MAX_STATES} automaton states "
                                          "(refused: simplify the pattern or bound its repeats)")
                j = index[key] = len(sets)
                sets.append(key)
            row.append(j)
        if work > MAX_WORK:
            raise ConstraintError("the constraint is too expensive to compile (refused: simplify the pattern "
                                  "or bound its repeats)")
        table.append(row)
        i += 1
    accept = [final in s for s in sets]
    live = _co_reachable(table, accept)
    if not live[0]:
        raise ConstraintError("the constraint matches nothing")
    # renumber the live states (0 stays the start) and expand classes to bytes
    order = [s for s in range(len(sets)) if live[s]]
    new = {s: k for k, s in enumerate(order)}
    rows = []
    for s in order:
        crow = [new.get(t, -1) if t >= 0 else -1 for t in table[s]]
        rows.append([crow[class_of[b]] for b in range(256)])
    return DFA(rows, [accept[s] for s in order], reps)


def _co_reachable(table: list[list[int]], accept: list[bool]) -> list[bool]:
    back: list[list[int]] = [[] for _ in table]
    for s, row in enumerate(table):
        for t in set(row):
            if t >= 0:
                back[t].append(s)
    live = list(accept)
    todo = [s for s, a in enumerate(accept) if a]
    while todo:
        for p in back[todo.pop()]:
            if not live[p]:
                live[p] = True
                todo.append(p)
    return live
