"""The issue's bar for constrained decoding, with SmolLM2-135M-Instruct on the GPU: 10 JSON Schemas x 5
generations (greedy, then sampling with four seeds) all parse and validate with `jsonschema`; regular-expression
outputs match `re.fullmatch`; a GBNF grammar's outputs parse (`ast.parse`, `json.loads`)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import jsonschema
import pytest

import webinfer
from webinfer.llm.constrain import grammar_constraint, json_schema_constraint, regex_constraint
from webinfer.llm.generate import Generator

DATA = Path(__file__).parent / "data"
SCHEMAS = json.loads((DATA / "constrain_schemas.json").read_text())
SEEDS = [0, 1, 2, 3, 4]  # 0: greedy
# bounded (at most 8 factors of at most 3 numbers), so an answer always fits in max_new_tokens
ARITH = """root ::= expr
expr ::= term ((" + " | " - ") term){0,3}
term ::= factor ((" * " | " / ") factor){0,1}
factor ::= num | "(" num ((" + " | " - " | " * ") num){1,2} ")"
num ::= [1-9] [0-9]{0,2}
"""


def _opts(seed: int) -> dict:
    return {"temperature": 0.0} if seed == 0 else {"temperature": 0.8, "top_p": 0.95, "seed": seed}


@pytest.fixture(scope="module")
def smollm(smollm_dir, tmp_path_factory) -> Generator:
    art = tmp_path_factory.mktemp("smollm-constrain") / "smollm.wi"
    webinfer.build(str(smollm_dir / "model.onnx"), str(art), max_seq=512, target="software")
    return Generator.load(str(art))


def _generate(gen: Generator, prompt: str, constraint, seed: int, max_new_tokens: int = 200) -> str:
    """The model's answer to ``prompt`` under ``constraint`` (seed 0: greedy)."""
    list(gen.chat([{"role": "user", "content": prompt}], constraint=constraint, max_new_tokens=max_new_tokens,
                  **_opts(seed)))
    return gen.stats["text"]


@pytest.mark.slow
@pytest.mark.parametrize("case", range(len(SCHEMAS)))
def test_json_schema_outputs_validate(smollm, case):
    schema = SCHEMAS[case]["schema"]
    c = json_schema_constraint(schema, smollm.tokenizer)
    for seed in SEEDS:
        text = _generate(smollm, SCHEMAS[case]["prompt"], c, seed)
        print(f"\nschema {case} seed {seed}: compile {c.compile_s * 1000:.0f} ms, "
              f"decode {smollm.stats['decode_tok_s'] or 0:.1f} tok/s: {text}")
        jsonschema.validate(json.loads(text), schema, format_checker=jsonschema.FormatChecker())


@pytest.mark.slow
def test_regex_outputs_match(smollm):
    pattern = r"(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), [0-9]{1,2}:[0-5][0-9] (am|pm)"
    c = regex_constraint(pattern, smollm.tokenizer)
    for seed in SEEDS[:3]:
        text = _generate(smollm, "When shall we meet? Give a day and a time.", c, seed, 40)
        print(f"\nregex seed {seed}: {text}")
        assert re.fullmatch(pattern, text), text


@pytest.mark.slow
def test_grammar_outputs_parse(smollm):
    g = grammar_constraint(ARITH, smollm.tokenizer)
    for seed in SEEDS[:3]:
        text = _generate(smollm, "Write an arithmetic expression that equals 42.", g, seed, 200)
        print(f"\ngrammar seed {seed}: {text}")
        assert g.matches(text), text  # not cut short by max_new_tokens
        ast.parse(text, mode="eval")
    j = grammar_constraint((DATA / "json.gbnf").read_text(), smollm.tokenizer)
    list(smollm.chat([{"role": "user", "content": "Give a JSON object with a cat's name and age."}], constraint=j,
                      max_new_tokens=200, repetition_penalty=1.2))
    text = smollm.stats["text"]
    print(f"\njson.gbnf: {text}")
    assert isinstance(json.loads(text), dict)
