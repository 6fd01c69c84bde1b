"""Symbolic dimensions: shapes like ``[batch, seq * 2]`` that the build reasons about and the runtime binds.

A dim is an ``int`` or a :class:`Sym`, a polynomial with integer coefficients over atoms (dim names, or
opaque terms such as ``x // 3``). Keeping polynomials in a normal form makes ``seq + seq == 2 * seq`` and
lets broadcasting compare dims. The build serialises dims with :func:`to_json`; the runtime evaluates them
with :func:`evaluate` once the feeds bind the names. Standard library only: the runtime imports this too.
"""

from __future__ import annotations

from typing import Union

from .errors import WebinferError

Dim = Union[int, "Sym"]
_ONE: tuple = ()


class Sym:
    """An integer polynomial over symbolic atoms, kept in a canonical sorted form."""

    __slots__ = ("terms",)

    def __init__(self, terms: dict[tuple, int]):
        self.terms = tuple(sorted(((m, c) for m, c in terms.items() if c != 0), key=repr))

    @staticmethod
    def name(name: str) -> "Sym":
        return Sym({(name,): 1})

    @staticmethod
    def atom(atom: tuple) -> "Sym":
        return Sym({(atom,): 1})

    def __hash__(self) -> int:
        return hash(self.terms)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sym):
            return self.terms == other.terms
        return False

    def __repr__(self) -> str:
        return to_text(self)

    def __add__(self, o: Dim) -> Dim:
        return add(self, o)

    __radd__ = __add__

    def __sub__(self, o: Dim) -> Dim:
        return add(self, mul(o, -1))

    def __rsub__(self, o: Dim) -> Dim:
        return add(o, mul(self, -1))

    def __mul__(self, o: Dim) -> Dim:
        return mul(self, o)

    __rmul__ = __mul__

    def __floordiv__(self, o: Dim) -> Dim:
        return floordiv(self, o)

    def __mod__(self, o: Dim) -> Dim:
        return mod(self, o)


def _terms(d: Dim) -> dict[tuple, int]:
    return {_ONE: d} if isinstance(d, int) else dict(d.terms)


def _make(terms: dict[tuple, int]) -> Dim:
    terms = {m: c for m, c in terms.items() if c != 0}
    if not terms:
        return 0
    if list(terms) == [_ONE]:
        return terms[_ONE]
    return Sym(terms)


def add(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    out = _terms(a)
    for m, c in _terms(b).items():
        out[m] = out.get(m, 0) + c
    return _make(out)


def mul(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    out: dict[tuple, int] = {}
    for ma, ca in _terms(a).items():
        for mb, cb in _terms(b).items():
            m = tuple(sorted(ma + mb, key=repr))
            out[m] = out.get(m, 0) + ca * cb
    return _make(out)


def _split(a: Dim, b: int) -> tuple[Dim, Dim]:
    """``a = b*q + r`` with every coefficient of ``r`` in ``[0, b)`` (terms are integers, so
    ``floor(a / b) = q + floor(r / b)`` and ``a % b = r % b``)."""
    q: dict[tuple, int] = {}
    r: dict[tuple, int] = {}
    for m, c in _terms(a).items():
        q[m], r[m] = divmod(c, b)
    return _make(q), _make(r)


def _is_div_atom(atom) -> bool:
    return not isinstance(atom, str) and atom[0] == "//" and isinstance(atom[2], int) and atom[2] > 0


def floordiv(a: Dim, b: Dim) -> Dim:
    """``a // b``, canonical for a positive constant ``b``: whole multiples of ``b`` come out of the division
    (``(2*H + 3) // 2 = H + 1``), and a division of a division becomes one division
    (``((H + 1) // 2 + 1) // 2 = (H + 3) // 4``), so a chain of stride-2 windows stays ``(H + 31) // 32``
    however deep the network."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    if b == 1:
        return a
    if isinstance(b, int) and b > 0:
        q, r = _split(a, b)
        return add(q, _floor_rest(r, b))
    if isinstance(a, Sym) and a == b:
        return 1
    return Sym.atom(("//", a, b))


def _floor_rest(r: Dim, b: int) -> Dim:
    """``r // b`` for an ``r`` whose coefficients lie in ``[0, b)``."""
    if isinstance(r, int):
        return r // b
    for m, c in r.terms:
        if c == 1 and len(m) == 1 and _is_div_atom(m[0]):
            inner, k = m[0][1], m[0][2]
            # floor((floor(A / k) + P) / b) = floor((A + k*P) / (k*b)) for integer P
            rest = add(r, mul(Sym.atom(m[0]), -1))
            return floordiv(add(inner, mul(rest, k)), k * b)
    return Sym.atom(("//", r, b))


def mod(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a % b
    if isinstance(b, int) and b > 0:
        _, r = _split(a, b)
        return r % b if isinstance(r, int) else Sym.atom(("%", r, b))
    return Sym.atom(("%", a, b))


def exact_div(a: Dim, b: Dim) -> Dim:
    """``a // b`` for dims, dividing polynomials by a monomial exactly (``b*s*768 / (b*s*12) = 64``)."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    if a == b:
        return 1
    bt = _terms(b)
    if len(bt) != 1:
        return floordiv(a, b)
    (mb, cb), = bt.items()
    out: dict = {}
    for m, c in _terms(a).items():
        rest = list(m)
        if c % cb:
            return floordiv(a, b)
        for atom in mb:
            if atom not in rest:
                return floordiv(a, b)
            rest.remove(atom)
        key = tuple(sorted(rest, key=repr))
        out[key] = out.get(key, 0) + c // cb
    return _make(out)


def ceildiv(a: Dim, b: Dim) -> Dim:
    return floordiv(add(a, add(b, -1)), b)


def nonnegative(d: Dim) -> bool:
    """Provably ``>= 0`` for any binding of the names (dims are sizes, so names are ``>= 0``)."""
    if isinstance(d, int):
        return d >= 0
    for m, c in d.terms:
        if c < 0:
            return False
        for atom in m:
            if isinstance(atom, str):
                continue
            op, x, y = atom
            if op in ("//", "%"):
                if not (nonnegative(x) and isinstance(y, int) and y > 0):
                    return False
            elif op == "max":
                if not (nonnegative(x) or nonnegative(y)):
                    return False
            elif not (nonnegative(x) and nonnegative(y)):
                return False
    return True


def _as_division(d: Dim) -> tuple[Dim, int] | None:
    """``d`` as ``floor(n / m)``: a coefficient-1 division atom plus the rest, ``floor((A + m*rest) / m)``."""
    if isinstance(d, int):
        return None
    for m, c in d.terms:
        if c == 1 and len(m) == 1 and _is_div_atom(m[0]):
            k = m[0][2]
            return add(m[0][1], mul(add(d, mul(Sym.atom(m[0]), -1)), k)), k
    return None


def less_equal(a: Dim, b: Dim) -> bool:
    """Provably ``a <= b`` for every binding of the names; False when not known. Floor divisions are compared
    through their numerators (``H // 2 <= (H + 1) // 2``): a ceil-mode pool's two candidate sizes are then
    ordered, and its ``min`` is one of them instead of a new atom."""
    if nonnegative(add(b, mul(a, -1))):
        return True
    da, db = _as_division(a), _as_division(b)
    if da and db and da[1] == db[1]:
        return less_equal(da[0], db[0])
    if db and not da:  # a <= floor(B / m)  <=  m*a <= B  (a is an integer)
        return less_equal(mul(a, db[1]), db[0])
    if da and not db:  # floor(A / m) <= b  <=  A <= m*b + m - 1
        return less_equal(da[0], add(mul(b, da[1]), da[1] - 1))
    return False


def _order(a: Dim, b: Dim, keep_larger: bool) -> Dim | None:
    """max (``keep_larger``) or min of two dims when their order is known, else None."""
    if less_equal(b, a):
        return a if keep_larger else b
    if less_equal(a, b):
        return b if keep_larger else a
    return None


def dmax(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b)
    known = _order(a, b, True)
    if known is not None:
        return known
    a, b = sorted((a, b), key=repr)  # max(a, b) and max(b, a) are one expression
    return Sym.atom(("max", a, b))


def dmin(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    known = _order(a, b, False)
    if known is not None:
        return known
    a, b = sorted((a, b), key=repr)
    return Sym.atom(("min", a, b))


def product(dims) -> Dim:
    out: Dim = 1
    for d in dims:
        out = mul(out, d)
    return out


def is_static(dims) -> bool:
    return all(isinstance(d, int) for d in dims)


def names(d: Dim) -> set[str]:
    """The dim names a dim depends on."""
    if isinstance(d, int):
        return set()
    out: set[str] = set()
    for m, _ in d.terms:
        for atom in m:
            if isinstance(atom, str):
                out.add(atom)
            else:
                out |= names(atom[1]) | names(atom[2])
    return out


def to_json(d: Dim):
    """Serialise for the manifest: ints stay ints, polynomials become prefix lists."""
    if isinstance(d, int):
        return d
    if len(d.terms) == 1 and d.terms[0][1] == 1 and len(d.terms[0][0]) == 1:  # a name or one atom, unwrapped
        atom = d.terms[0][0][0]
        return atom if isinstance(atom, str) else [atom[0], to_json(atom[1]), to_json(atom[2])]
    terms = []
    for m, c in d.terms:
        factors = [c] + [a if isinstance(a, str) else [a[0], to_json(a[1]), to_json(a[2])] for a in m]
        terms.append(["*"] + factors)
    return ["+"] + terms


def to_text(d: Dim) -> str:
    if isinstance(d, int):
        return str(d)
    parts = []
    for m, c in d.terms:
        atoms = [a if isinstance(a, str) else _atom_text(a) for a in m]
        if not atoms:
            parts.append(str(c))
        else:
            parts.append("*".join(([str(c)] if c != 1 else []) + atoms))
    return " + ".join(parts).replace("+ -", "- ")


def _atom_text(atom: tuple) -> str:
    op, a, b = atom
    if op in ("max", "min"):
        return f"{op}({to_text(a)}, {to_text(b)})"
    paren = [to_text(x) if isinstance(x, int) or to_text(x).isidentifier() else f"({to_text(x)})" for x in (a, b)]
    return f"({paren[0]} {op} {paren[1]})"


def from_json(j) -> Dim:
    """Inverse of :func:`to_json`."""
    if isinstance(j, int):
        return j
    if isinstance(j, str):
        return Sym.name(j)
    op = j[0]
    if op == "+":
        out: Dim = 0
        for t in j[1:]:
            out = add(out, from_json(t))
        return out
    if op == "*":
        out = 1
        for f in j[1:]:
            out = mul(out, from_json(f))
        return out
    return Sym.atom((op, from_json(j[1]), from_json(j[2])))


def json_text(j) -> str:
    return to_text(from_json(j))


_OPS = {
    "//": lambda a, b: a // b,
    "%": lambda a, b: a % b,
    "max": max,
    "min": min,
}


def evaluate(j, env: dict[str, int]) -> int:
    """Evaluate a serialised dim with the names bound in ``env`` (runtime side)."""
    if isinstance(j, int):
        return j
    if isinstance(j, str):
        if j not in env:
            raise KeyError(j)
        return env[j]
    op = j[0]
    if op == "+":
        return sum(evaluate(t, env) for t in j[1:])
    if op == "*":
        out = 1
        for f in j[1:]:
            out *= evaluate(f, env)
        return out
    if op in _OPS:
        a, b = evaluate(j[1], env), evaluate(j[2], env)
        if b == 0 and op in ("//", "%"):
            raise WebinferError(f"a dim expression divides by zero: {to_text(from_json(j))}")
        return _OPS[op](a, b)
    raise ValueError(f"unknown dim expression operator {op!r}")
