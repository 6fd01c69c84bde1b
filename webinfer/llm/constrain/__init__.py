"""Constrained decoding: output that must match a JSON Schema, a regular expression or a GBNF grammar.

Standard library only (runs in Pyodide). A constraint is compiled per request into a byte-level automaton
(a DFA for regular expressions and JSON Schemas: automaton.py; a pushdown automaton for grammars: grammar.py),
lifted to the model's tokens by a vocabulary trie walk (vocab.py). Each decode step, the generator uploads the
current state's allowed-token bitmask (vocab/32 u32 words) into the artifact's ``token_mask`` input, and the GPU
sampler gives every disallowed logit -inf before the penalty, temperature, top-k and top-p: the logits are never
read back, only the sampled id. End-of-sequence is allowed in accepting states only; a state that allows
nothing else ends the generation.

    from webinfer.llm.constrain import json_schema_constraint, regex_constraint, grammar_constraint
    c = json_schema_constraint({"type": "object", "properties": {...}}, gen.tokenizer)
    text = "".join(t.text for t in gen.generate(prompt, constraint=c, max_new_tokens=200))

Pathological input (a DFA past its state budget, repeats that expand past the node budget, a schema nested or
recursive past its depth limit, a left-recursive grammar) is refused with one line (``ConstraintError``).
"""

from __future__ import annotations

import json

from .automaton import ConstraintError, compile_dfa
from .vocab import Masks, Vocabulary

__all__ = ["Constraint", "ConstraintError", "json_schema_constraint", "regex_constraint", "grammar_constraint",
           "json_object_constraint"]


class Constraint:
    """A compiled constraint over one tokenizer's vocabulary; ``matcher()`` follows one generation."""

    def __init__(self, machine, tokenizer, kind: str, compile_s: float = 0.0) -> None:
        if tokenizer is None:
            raise ConstraintError("constrained decoding needs the artifact's tokenizer")
        self.machine = machine
        self.kind = kind
        self.vocab = Vocabulary.of(tokenizer)
        self.masks = Masks(machine, self.vocab)
        self.compile_s = compile_s

    def matches(self, text: str) -> bool:
        """Whether the whole ``text`` is accepted (for checks; generation uses the token level)."""
        m = self.machine
        s = m.start
        for b in text.encode("utf-8"):
            t = m.rows[s][b]
            s = m.fill(s, b) if t == -2 else t
            if s < 0:
                return False
        return m.accepting(s)

    def matcher(self) -> "Matcher":
        return Matcher(self)

    def token_bytes(self, token: int) -> bytes | None:
        return self.vocab.bytes.get(token)


class Matcher:
    """The automaton state of one generation: ``mask`` for the next step, ``advance`` by the sampled token."""

    def __init__(self, constraint: Constraint) -> None:
        self.c = constraint
        self.state = constraint.machine.start

    def mask(self, n_words: int) -> bytes:
        """The allowed-token bitmask padded (with disallowed tokens) to ``n_words`` u32 words."""
        words, _ = self.c.masks.words(self.state)
        data = words.tobytes()
        if len(words) > n_words:
            raise ConstraintError(f"the tokenizer has {self.c.vocab.size} tokens, more than the model's "
                                  f"{32 * n_words}")
        return data + bytes(4 * n_words - len(data))

    def finished(self) -> bool:
        """No token but end-of-sequence can follow (the output is complete)."""
        words, any_token = self.c.masks.words(self.state)
        return not any_token

    def accepting(self) -> bool:
        return self.c.machine.accepting(self.state)

    def advance(self, token: int) -> None:
        data = self.c.token_bytes(token)
        if data is None:
            raise ConstraintError(f"token {token} is not allowed by the constraint")
        m, s = self.c.machine, self.state
        for b in data:
            t = m.rows[s][b]
            s = m.fill(s, b) if t == -2 else t
            if s < 0:
                raise ConstraintError(f"token {token} is not allowed by the constraint")
        self.state = s


def _timed(kind: str, build, tokenizer) -> Constraint:
    import time

    t0 = time.perf_counter()
    machine = build()
    return Constraint(machine, tokenizer, kind, time.perf_counter() - t0)


def regex_constraint(pattern: str, tokenizer) -> Constraint:
    """Output that matches ``pattern`` whole (regex.py's subset of Python's syntax)."""
    from .regex import parse_regex

    return _timed("regex", lambda: compile_dfa(parse_regex(pattern)), tokenizer)


def json_schema_constraint(schema, tokenizer, *, whitespace: int = 0) -> Constraint:
    """Output that is JSON valid against ``schema`` (a dict or JSON text; schema.py lists what is supported).
    ``whitespace``: how many spaces/newlines may separate tokens of the JSON (0: compact JSON)."""
    from .schema import schema_expression

    if isinstance(schema, (str, bytes)):
        try:
            schema = json.loads(schema)
        except ValueError as e:
            raise ConstraintError(f"the JSON schema is not valid JSON ({e})") from None
    return _timed("json_schema", lambda: compile_dfa(schema_expression(schema, whitespace)), tokenizer)


def json_object_constraint(tokenizer, *, whitespace: int = 0) -> Constraint:
    """Any JSON object (OpenAI's ``response_format={"type": "json_object"}``), nested at most
    ``schema.ANY_DEPTH`` levels."""
    return json_schema_constraint({"type": "object"}, tokenizer, whitespace=whitespace)


def grammar_constraint(grammar: str, tokenizer, *, root: str = "root") -> Constraint:
    """Output that the GBNF grammar (llama.cpp's syntax) derives from ``root``."""
    from .grammar import compile_grammar

    return _timed("grammar", lambda: compile_grammar(grammar, root), tokenizer)


SPEC_OPTIONS = ("json_schema", "regex", "grammar", "json_object")


def with_constraint(options: dict, tokenizer) -> dict:
    """Generation options where ``json_schema`` (a schema), ``regex``, ``grammar`` (GBNF text) or ``json_object``
    (true) become ``constraint=`` (the page's JS API: chat.send(messages, {jsonSchema: {...}})); ``whitespace``
    goes with the JSON ones. At most one of them."""
    given = [k for k in SPEC_OPTIONS if options.get(k) not in (None, False)]
    if not given:
        return {k: v for k, v in options.items() if k not in SPEC_OPTIONS and k != "whitespace"}
    if len(given) > 1:
        raise ConstraintError(f"give at most one of {', '.join(SPEC_OPTIONS)} (got {', '.join(given)})")
    rest = {k: v for k, v in options.items() if k not in SPEC_OPTIONS and k != "whitespace"}
    ws = options.get("whitespace", 0)
    kind = given[0]
    spec = options[kind]
    if kind == "json_schema":
        rest["constraint"] = json_schema_constraint(spec, tokenizer, whitespace=ws)
    elif kind == "json_object":
        rest["constraint"] = json_object_constraint(tokenizer, whitespace=ws)
    elif kind == "regex":
        rest["constraint"] = regex_constraint(spec, tokenizer)
    else:
        rest["constraint"] = grammar_constraint(spec, tokenizer)
    return rest
