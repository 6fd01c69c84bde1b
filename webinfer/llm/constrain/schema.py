"""JSON Schema as a regular expression tree (automaton.py), for the subset OpenAI's structured outputs accept.

Supported: ``type`` (one or a list), objects with ``properties`` written in schema order, ``required`` ones always
and the others optional (``additionalProperties`` is never generated, so ``false`` holds), arrays with ``items`` /
``prefixItems`` and ``minItems``/``maxItems``, ``enum``, ``const``, integers with ``minimum``/``maximum`` (and the
exclusive forms) exactly (at most 16 digits when unbounded), numbers with bounds as integers plus fractions that stay inside them (no exponent),
strings with ``minLength``/``maxLength``, ``pattern`` (regex.py's subset; the whole string matches it, its
characters limited to what JSON writes unescaped) and the ``format``s date, time, date-time, email, uuid, ipv4,
uri, hostname (others: any string), ``anyOf`` (and ``oneOf`` read as ``anyOf``: its branches should be
disjoint), ``allOf`` of one schema, ``$ref`` into ``$defs``/``definitions`` (a recursive reference is expanded
``MAX_REF_DEPTH`` times, then the branch that needs it is dropped). A schema without a type is any JSON value, an
object without properties any JSON object, nested at most ``ANY_DEPTH`` levels.

Whitespace: none by default (compact JSON, what the model is then steered to); ``whitespace=k`` allows up to k
spaces or newlines around each ``{ } [ ] , :``. Keywords that constrain in ways not expressible here (``not``,
``if``, ``uniqueItems``, ``multipleOf``, ``patternProperties``, ...) are refused with one line.
"""

from __future__ import annotations

import json
import math

from .automaton import EMPTY, ConstraintError, alt, chars, intersect, lit, opt, rep, seq
from .regex import parse_regex

MAX_DEPTH = 32
MAX_REF_DEPTH = 3
ANY_DEPTH = 3
DIGIT = chars((48, 57))
NONZERO = chars((49, 57))
HEX = chars((48, 57), (65, 70), (97, 102))
SAFE = [(0x20, 0x21), (0x23, 0x5B), (0x5D, 0x10FFFF)]  # what a JSON string holds unescaped
STRING_CHAR = alt(chars(*SAFE), seq(lit("\\"), chars(*[(ord(c), ord(c)) for c in '"\\/bfnrt'])))
STRING = seq(lit('"'), rep(STRING_CHAR, 0, None), lit('"'))
# Numbers are written with at most 16 integer digits, 15 fraction digits and a 3-digit exponent: every such
# text is valid, and a model repeating a digit cannot go on forever.
NUMBER = seq(opt(lit("-")), alt(lit("0"), seq(NONZERO, rep(DIGIT, 0, 15))),
             opt(seq(lit("."), rep(DIGIT, 1, 15))),
             opt(seq(chars((69, 69), (101, 101)), opt(chars((43, 43), (45, 45))), rep(DIGIT, 1, 3))))
FRACTION = seq(lit("."), rep(DIGIT, 1, 15))
_REFUSED = ("not", "if", "then", "else", "patternProperties", "dependentRequired", "dependentSchemas",
            "unevaluatedProperties", "unevaluatedItems", "multipleOf", "propertyNames", "contains",
            "minProperties", "maxProperties", "minContains", "maxContains")
_IGNORED_TYPES = ("description", "title", "default", "examples", "$schema", "$id", "$comment", "strict")


def _re(pattern: str):
    return parse_regex(pattern)


FORMATS = {
    "date": r"[0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|"
            r"02-(0[1-9]|1[0-9]|2[0-8]))",
    "time": r"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])",
    "email": r"[a-z0-9]([a-z0-9._+-]{0,30}[a-z0-9])?@[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?(\.[a-z]{2,10}){1,3}",
    "uuid": r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    "ipv4": r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}",
    "uri": r"https?://[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?){0,4}"
           r"(/[a-zA-Z0-9._~%-]{1,40}){0,8}",
    "hostname": r"[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?){0,4}",
}
FORMATS["date-time"] = FORMATS["date"] + "T" + FORMATS["time"]


def schema_expression(schema, whitespace: int = 0):
    """The expression tree of the JSON texts valid against ``schema``, or ConstraintError."""
    if not isinstance(schema, (dict, bool)):
        raise ConstraintError("a JSON schema must be an object (or true)")
    if not isinstance(whitespace, int) or not 0 <= whitespace <= 8:
        raise ConstraintError("whitespace must be an integer in 0..8")
    expr = _Compiler(schema, whitespace).value(schema, 0, ())
    if expr is None:
        raise ConstraintError(f"the schema's recursion cannot end within {MAX_REF_DEPTH} levels of $ref")
    return expr


class _Compiler:
    def __init__(self, root, whitespace: int) -> None:
        self.root = root
        self.ws = rep(chars((32, 32), (10, 10)), 0, whitespace) if whitespace else EMPTY

    def punct(self, c: str):
        return seq(self.ws, lit(c), self.ws) if self.ws is not EMPTY else lit(c)

    def value(self, s, depth: int, refs: tuple):
        """The expression of ``s``, or None where only a too-deep recursion could satisfy it."""
        if depth > MAX_DEPTH:
            raise ConstraintError(f"the schema is nested deeper than {MAX_DEPTH} levels")
        if s is True or s == {}:
            return self.any(ANY_DEPTH)
        if s is False or not isinstance(s, dict):
            raise ConstraintError(f"unsupported schema {json.dumps(s)[:60]} (expected an object)")
        for key in _REFUSED:
            if key in s:
                raise ConstraintError(f"JSON schema keyword {key!r} is not supported for constrained decoding")
        if s.get("uniqueItems") is True:
            raise ConstraintError("JSON schema keyword 'uniqueItems' is not supported for constrained decoding")
        if "$ref" in s:
            ref = s["$ref"]
            if refs.count(ref) >= MAX_REF_DEPTH:
                return None
            rest = {k: v for k, v in s.items() if k != "$ref" and k not in _IGNORED_TYPES}
            if rest and set(rest) - {"$defs", "definitions"}:
                raise ConstraintError("a $ref beside other keywords is not supported")
            return self.value(self.resolve(ref), depth + 1, refs + (ref,))
        if "allOf" in s:
            parts = s["allOf"]
            if not isinstance(parts, list) or len(parts) != 1:
                raise ConstraintError("allOf is supported with exactly one schema")
            return self.value(dict({k: v for k, v in s.items() if k != "allOf"}, **parts[0]), depth + 1, refs)
        for key in ("anyOf", "oneOf"):
            if key in s:
                if not isinstance(s[key], list) or not s[key]:
                    raise ConstraintError(f"{key} must be a non-empty list of schemas")
                base = {k: v for k, v in s.items() if k != key}
                branches = [self.value(dict(base, **b) if isinstance(b, dict) else b, depth + 1, refs)
                            for b in s[key]]
                kept = [b for b in branches if b is not None]
                return alt(*kept) if kept else None
        if "const" in s:
            return lit(_dump(s["const"]))
        if "enum" in s:
            if not isinstance(s["enum"], list) or not s["enum"]:
                raise ConstraintError("enum must be a non-empty list")
            return alt(*(lit(_dump(v)) for v in s["enum"]))
        kind = s.get("type")
        if kind is None:
            kind = "object" if "properties" in s else "array" if "items" in s or "prefixItems" in s else None
        if kind is None:
            return self.any(ANY_DEPTH)
        if isinstance(kind, list):
            if not kind:
                raise ConstraintError("type must not be an empty list")
            kept = [b for b in (self.typed(k, s, depth, refs) for k in kind) if b is not None]
            return alt(*kept) if kept else None
        return self.typed(kind, s, depth, refs)

    def resolve(self, ref):
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise ConstraintError(f"only local $ref ('#/$defs/...') are supported, got {str(ref)[:60]!r}")
        node = self.root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                raise ConstraintError(f"$ref {ref[:60]!r} points at nothing")
            node = node[part]
        return node

    def typed(self, kind, s: dict, depth: int, refs: tuple):
        if kind == "string":
            return self.string(s)
        if kind == "integer":
            return integer_range(*_int_bounds(s))
        if kind == "number":
            return number_range(s)
        if kind == "boolean":
            return alt(lit("true"), lit("false"))
        if kind == "null":
            return lit("null")
        if kind == "object":
            return self.object(s, depth, refs)
        if kind == "array":
            return self.array(s, depth, refs)
        raise ConstraintError(f"unknown JSON schema type {kind!r}")

    def string(self, s: dict):
        lo, hi = s.get("minLength", 0), s.get("maxLength")
        if not isinstance(lo, int) or (hi is not None and (not isinstance(hi, int) or hi < lo)):
            raise ConstraintError("minLength/maxLength must be integers with minLength <= maxLength")
        if "pattern" in s:
            body = _json_safe(parse_regex(s["pattern"]))
        elif s.get("format") in FORMATS:
            body = _re(FORMATS[s["format"]])
        else:
            return seq(lit('"'), rep(STRING_CHAR, lo, hi), lit('"'))
        if lo or hi is not None:
            raise ConstraintError("minLength/maxLength together with a pattern or format are not supported")
        return seq(lit('"'), body, lit('"'))

    def object(self, s: dict, depth: int, refs: tuple):
        props = s.get("properties")
        if props is None:
            return self.any_object(ANY_DEPTH - 1)
        if not isinstance(props, dict):
            raise ConstraintError("properties must be an object")
        required = s.get("required", [])
        if not isinstance(required, list) or any(r not in props for r in required):
            raise ConstraintError("required must list names of the object's properties")
        items = []
        for name, sub in props.items():
            value = self.value(sub, depth + 1, refs)
            if value is None and name in required:
                return None
            if value is not None:
                items.append((seq(lit(_dump(name)), self.punct(":"), value), name in required))
        memo: dict = {}

        def rest(i: int, first: bool):  # the properties from i on, the first one written without a comma
            if i == len(items):
                return EMPTY
            if (i, first) not in memo:
                kv, req = items[i]
                with_it = seq(kv, rest(i + 1, False)) if first else seq(self.punct(","), kv, rest(i + 1, False))
                memo[i, first] = with_it if req else alt(with_it, rest(i + 1, first))
            return memo[i, first]

        return seq(self.punct("{"), rest(0, True), self.punct("}"))

    def array(self, s: dict, depth: int, refs: tuple):
        lo, hi = s.get("minItems", 0), s.get("maxItems")
        if not isinstance(lo, int) or (hi is not None and (not isinstance(hi, int) or hi < lo)):
            raise ConstraintError("minItems/maxItems must be integers with minItems <= maxItems")
        prefix = [self.value(p, depth + 1, refs) for p in s.get("prefixItems", [])]
        items = s.get("items", True if not prefix else False)
        item = None if items is False else self.value(items, depth + 1, refs)
        if prefix:
            if any(p is None for p in prefix[:lo]):
                return None
            cut = next((i for i, p in enumerate(prefix) if p is None), len(prefix))
            n = min(cut, hi if hi is not None else cut)
            tail = None if item is None or n < len(prefix) else item
            body = self._list(prefix[:n], tail, lo, None if hi is None else max(hi - n, 0))
            return seq(self.punct("["), body, self.punct("]")) if body is not None else None
        if item is None:
            return seq(self.punct("["), self.punct("]")) if lo == 0 else None
        return seq(self.punct("["), self._list([], item, lo, hi), self.punct("]"))

    def _list(self, prefix: list, item, lo: int, more: int | None):
        """``prefix`` items (the first ``lo`` of them required), then up to ``more`` (None: any) of ``item``."""
        comma = self.punct(",")
        if not prefix:
            if item is None or more == 0:
                return EMPTY if lo == 0 else None
            tail = rep(seq(comma, item), max(lo - 1, 0), None if more is None else more - 1)
            full = seq(item, tail)
            return full if lo > 0 else opt(full)
        out = EMPTY
        for i in reversed(range(len(prefix))):
            after = out
            if i == len(prefix) - 1 and item is not None and more != 0:
                after = rep(seq(comma, item), 0, more)
            step = seq(prefix[i], after) if i == 0 else seq(comma, prefix[i], after)
            out = step if i < lo else opt(step)
        return out

    def any(self, depth: int):
        prim = alt(STRING, NUMBER, lit("true"), lit("false"), lit("null"))
        if depth <= 0:
            return prim
        inner = self.any(depth - 1)
        arr = seq(self.punct("["), opt(seq(inner, rep(seq(self.punct(","), inner), 0, None))), self.punct("]"))
        return alt(prim, self.any_object(depth - 1, inner), arr)

    def any_object(self, depth: int, inner=None):
        inner = inner if inner is not None else self.any(depth)
        kv = seq(STRING, self.punct(":"), inner)
        return seq(self.punct("{"), opt(seq(kv, rep(seq(self.punct(","), kv), 0, None))), self.punct("}"))


def _dump(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _json_safe(expr):
    """A pattern's characters limited to those a JSON string writes unescaped."""
    kind = expr[0]
    if kind == "chars":
        return ("chars", tuple(intersect(expr[1], SAFE)))
    if kind in ("seq", "alt"):
        return (kind, tuple(_json_safe(p) for p in expr[1]))
    return ("rep", _json_safe(expr[1]), expr[2], expr[3])


def _int_bounds(s: dict) -> tuple[int | None, int | None]:
    lo = hi = None
    for key, exclusive, up in (("minimum", False, False), ("exclusiveMinimum", True, False),
                               ("maximum", False, True), ("exclusiveMaximum", True, True)):
        v = s.get(key)
        if v is None or isinstance(v, bool):
            continue
        if not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ConstraintError(f"{key} must be a finite number")
        if up:
            b = (math.ceil(v) - 1) if exclusive else math.floor(v)
            hi = b if hi is None else min(hi, b)
        else:
            b = (math.floor(v) + 1) if exclusive else math.ceil(v)
            lo = b if lo is None else max(lo, b)
    if lo is not None and hi is not None and lo > hi:
        raise ConstraintError("the schema's bounds leave no integer")
    return lo, hi


def integer_range(lo: int | None, hi: int | None):
    """Decimal integers (no leading zeros, no '-0') in [lo, hi]; None: unbounded."""
    parts = []
    if hi is None or hi >= 0:
        parts.append(_nonneg(max(lo, 0) if lo is not None else 0, hi))
    if lo is None or lo < 0:
        top = -hi if hi is not None and hi < 0 else 1
        parts.append(seq(lit("-"), _nonneg(max(top, 1), None if lo is None else -lo)))
    return alt(*parts) if len(parts) > 1 else parts[0]


def _nonneg(a: int, b: int | None):
    parts = []
    la = len(str(a))
    top = len(str(b)) if b is not None else la  # unbounded: up to 16 digits (see NUMBER)
    for n in range(la, top + 1):
        lo = max(a, 10 ** (n - 1) if n > 1 else 0)
        hi = min(b, 10 ** n - 1) if b is not None else 10 ** n - 1
        if lo <= hi:
            parts.append(_same_length(str(lo), str(hi)))
    if b is None and la < 16:
        parts.append(seq(NONZERO, rep(DIGIT, la, 15)))
    return alt(*parts) if len(parts) > 1 else parts[0]


def _same_length(lo: str, hi: str):
    if not lo:
        return EMPTY
    n = len(lo) - 1
    if lo == "0" * len(lo) and hi == "9" * len(hi):
        return rep(DIGIT, len(lo), len(lo))
    if lo[0] == hi[0]:
        return seq(lit(lo[0]), _same_length(lo[1:], hi[1:]))
    parts = [seq(lit(lo[0]), _same_length(lo[1:], "9" * n))]
    if int(hi[0]) - int(lo[0]) > 1:
        parts.append(seq(chars((ord(lo[0]) + 1, ord(hi[0]) - 1)), rep(DIGIT, n, n)))
    parts.append(seq(lit(hi[0]), _same_length("0" * n, hi[1:])))
    return alt(*parts)


def number_range(s: dict):
    if not any(k in s for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")):
        return NUMBER
    lo, hi = _int_bounds(s)
    whole = integer_range(lo, hi)
    # k.f lies strictly between k and k + 1 (or -(m+1) and -m): allowed where that whole interval is inside
    frac = []
    kmax = None if hi is None else hi - 1
    kmin = 0 if lo is None else max(lo, 0)
    if kmax is None or kmax >= kmin:
        frac.append(seq(_nonneg(kmin, kmax), FRACTION))
    mmin = max(1, -hi if hi is not None else 1)
    mmax = None if lo is None else -lo - 1
    if mmax is None or mmax >= mmin:
        frac.append(seq(lit("-"), _nonneg(mmin, mmax), FRACTION))
    return alt(whole, *frac)
