"""Constrained decoding's automata (no GPU): regular expressions against Python's `re`, JSON Schemas against
`jsonschema` (texts drawn at random from the automaton must parse and validate), GBNF grammars against
`json.loads` / `ast.parse`, the token masks against a brute-force walk of every token, and the refusals."""

from __future__ import annotations

import ast
import itertools
import json
import random
import re
import time
from pathlib import Path

import jsonschema
import pytest

from webinfer.llm.constrain import (
    ConstraintError,
    grammar_constraint,
    json_schema_constraint,
    regex_constraint,
)
from webinfer.llm.constrain.automaton import compile_dfa
from webinfer.llm.constrain.grammar import compile_grammar
from webinfer.llm.constrain.regex import parse_regex
from webinfer.llm.constrain.schema import schema_expression

DATA = Path(__file__).parent / "data"
SCHEMAS = json.loads((DATA / "constrain_schemas.json").read_text())
JSON_GBNF = (DATA / "json.gbnf").read_text()
ARITH_GBNF = """
root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= num | "(" expr ")" | "-" factor
num ::= [1-9] [0-9]{0,3}
"""


def walk(machine, rnd: random.Random, soft: int = 60) -> bytes:
    """A random text the automaton accepts (past ``soft`` bytes it takes a shortest way to acceptance)."""
    s, out = machine.start, bytearray()
    while True:
        if machine.accepting(s) and (rnd.random() < 0.25 or len(out) > soft):
            return bytes(out)
        options = [b for b in range(256) if machine.step(s, b) >= 0]
        if not options:
            assert machine.accepting(s), "a live state with no way on"
            return bytes(out)
        b = rnd.choice(options) if len(out) <= soft else _toward_acceptance(machine, s)
        out.append(b)
        s = machine.step(s, b)


def _toward_acceptance(machine, state: int) -> int:
    """The first byte of a shortest way from ``state`` to an accepting state (breadth first)."""
    seen, frontier = {state}, [(state, None)]
    while frontier:
        nxt = []
        for s, first in frontier:
            for b in range(256):
                t = machine.step(s, b)
                if t < 0 or t in seen:
                    continue
                if machine.accepting(t):
                    return b if first is None else first
                seen.add(t)
                nxt.append((t, b if first is None else first))
        frontier = nxt
    raise AssertionError("no way to acceptance")


EXACT_PATTERNS = [r"[a-c]+@[a-c]+\.(com|org)", r"(ab|c)*d?", r'[^"x]{2,4}', r"é+[α-ω]*", r"(?:x|yz){2,3}",
                  r"^a.b$", r"[\u4e00-\u9fff]{1,2}z?", r"a{2}|b{0,2}c", r"(a|)+b"]


@pytest.mark.parametrize("pattern", EXACT_PATTERNS)
def test_regex_accepts_exactly_what_re_fullmatch_does(pattern):
    dfa = compile_dfa(parse_regex(pattern))
    rx = re.compile(pattern)
    alphabet = "abcdxyz@.-_ 0é中αω\"\n"
    rnd = random.Random(0)
    texts = {"".join(rnd.choice(alphabet) for _ in range(rnd.randrange(0, 9))) for _ in range(3000)}
    texts |= {"".join(p) for n in range(4) for p in itertools.product("abcd.@é", repeat=n)}
    texts |= {walk(dfa, rnd, 12).decode() for _ in range(300)}
    for text in texts:
        assert dfa.matches(text.encode()) == bool(rx.fullmatch(text)), (pattern, text)


def test_ascii_classes_are_a_subset_of_re():
    dfa = compile_dfa(parse_regex(r"\d{2}\w+\s\W\D\S"))
    rnd = random.Random(1)
    for _ in range(300):
        text = walk(dfa, rnd).decode()
        assert re.fullmatch(r"\d{2}\w+\s\W\D\S", text), text


@pytest.mark.parametrize("case", range(len(SCHEMAS)))
def test_schema_texts_parse_and_validate(case):
    schema = SCHEMAS[case]["schema"]
    dfa = compile_dfa(schema_expression(schema))
    rnd = random.Random(case)
    for _ in range(80):
        value = json.loads(walk(dfa, rnd).decode())
        jsonschema.validate(value, schema, format_checker=jsonschema.FormatChecker())


EXTRA_SCHEMAS = [
    {"type": "object"},
    {"type": "number", "minimum": -3.5, "maximum": 7},
    {"type": "integer", "exclusiveMinimum": -120, "exclusiveMaximum": 45},
    {"type": "integer", "minimum": 17},
    {"type": "integer", "maximum": -17},
    {"type": "string", "format": "date-time"},
    {"type": "string", "format": "uuid"},
    {"type": "string", "format": "ipv4"},
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False, "minItems": 1},
    {"type": "array", "prefixItems": [{"type": "boolean"}], "items": {"type": "null"}, "maxItems": 3},
    {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "null"}, "c": {"const": "x"},
                                      "d": {"type": ["string", "null"]}}, "required": ["c"]},
    {"oneOf": [{"type": "string", "pattern": "^a+$"}, {"type": "integer"}]},
    {},
]


@pytest.mark.parametrize("schema", EXTRA_SCHEMAS, ids=lambda s: json.dumps(s)[:40])
def test_more_schema_texts_validate(schema):
    dfa = compile_dfa(schema_expression(schema))
    rnd = random.Random(5)
    for _ in range(80):
        jsonschema.validate(json.loads(walk(dfa, rnd).decode()), schema, format_checker=jsonschema.FormatChecker())


def test_integer_bounds_are_exact():
    dfa = compile_dfa(schema_expression({"type": "integer", "minimum": -37, "maximum": 1205}))
    for n in range(-2000, 3000):
        assert dfa.matches(str(n).encode()) == (-37 <= n <= 1205), n
    assert not dfa.matches(b"007") and not dfa.matches(b"-0")


def test_whitespace_is_bounded():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    compact = compile_dfa(schema_expression(schema))
    spaced = compile_dfa(schema_expression(schema, whitespace=2))
    assert compact.matches(b'{"a":1}') and not compact.matches(b'{ "a":1}')
    assert spaced.matches(b'{ "a" :\n 1}') and not spaced.matches(b'{   "a":1}')


@pytest.mark.parametrize("grammar,check", [(JSON_GBNF, json.loads), (ARITH_GBNF, lambda t: ast.parse(t, mode="eval"))])
def test_grammar_texts_parse(grammar, check):
    machine = compile_grammar(grammar)
    rnd = random.Random(2)
    for _ in range(300):
        check(walk(machine, rnd).decode())


def test_grammar_rejects_what_does_not_parse():
    machine = compile_grammar(ARITH_GBNF)

    def accepts(text: str) -> bool:
        s = machine.start
        for b in text.encode():
            s = machine.step(s, b)
            if s < 0:
                return False
        return machine.accepting(s)

    assert accepts("12+(3*-4)/5") and accepts("-(((7)))")
    assert not accepts("12+") and not accepts("(1") and not accepts("01") and not accepts("1)")


def _one_line(fn, *args) -> str:
    t0 = time.perf_counter()
    with pytest.raises(ConstraintError) as e:
        fn(*args)
    print(f"refused in {time.perf_counter() - t0:.3f} s: {e.value}")
    msg = str(e.value)
    assert msg and "\n" not in msg
    return msg


def test_pathological_input_is_refused_with_one_line(tokenizer):
    assert "automaton states" in _one_line(regex_constraint, r"(a|b)*a(a|b){24}", tokenizer)
    assert "too large" in _one_line(regex_constraint, r"((a{1000}){1000}){1000}", tokenizer)
    assert "nested deeper" in _one_line(regex_constraint, "(" * 200 + "a" + ")" * 200, tokenizer)
    assert "backreferences" in _one_line(regex_constraint, r"(a)\1", tokenizer)
    nested: dict = {"type": "integer"}
    for _ in range(60):
        nested = {"type": "object", "properties": {"x": nested}, "required": ["x"]}
    assert "nested deeper" in _one_line(json_schema_constraint, nested, tokenizer)
    endless = {"$ref": "#/$defs/a", "$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"},
                                                      "minItems": 1}}}
    assert "recursion" in _one_line(json_schema_constraint, endless, tokenizer)
    assert "not supported" in _one_line(json_schema_constraint, {"type": "integer", "multipleOf": 3}, tokenizer)
    assert "left-recursive" in _one_line(grammar_constraint, 'root ::= root "a" | "b"', tokenizer)
    assert "left-recursive" in _one_line(grammar_constraint, 'root ::= x root "a" | "b"\nx ::= "c"?', tokenizer)
    assert "never finish" in _one_line(grammar_constraint, 'root ::= "a" root', tokenizer)


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir):
    from webinfer.llm.tokenizer import Tokenizer

    return Tokenizer.from_file(tokenizer_dir / "tokenizer.json")


def _brute_force(constraint, state: int) -> set[int]:
    m, out = constraint.machine, set()
    for token, data in constraint.vocab.bytes.items():
        s = state
        for b in data:
            s = m.step(s, b)
            if s < 0:
                break
        else:
            out.add(token)
    return out


@pytest.mark.parametrize("make", ["schema", "grammar", "regex"])
def test_token_masks_equal_a_walk_of_every_token(tokenizer, make):
    if make == "schema":
        c = json_schema_constraint(SCHEMAS[0]["schema"], tokenizer)
        text = '{"name":"Zoë Smith","age":41,"email":"zoe@example.com"}'
    elif make == "grammar":
        c = grammar_constraint(JSON_GBNF, tokenizer)
        text = '{"a": [1, 2.5e3, "x\\n"], "b": {"c": null}}'
    else:
        c = regex_constraint(r"(yes|no|maybe), because [a-z ]{1,30}\.", tokenizer)
        text = "maybe, because it rains."
    assert c.matches(text)
    m = c.matcher()
    states, s = [m.state], m.state
    for b in text.encode():
        s = c.machine.step(s, b)
        states.append(s)
    eos = tokenizer.eos_token_id
    for s in states[::3]:
        m.state = s
        words = m.mask((c.vocab.size + 31) // 32 + 2)
        bits = int.from_bytes(words, "little")
        got = {t for t in range(c.vocab.size) if bits >> t & 1}
        assert bits >> c.vocab.size == 0
        want = _brute_force(c, s) | ({eos} if c.machine.accepting(s) else set())
        assert got == want
