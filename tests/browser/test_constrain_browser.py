"""Constrained decoding in Chromium: the page's worker runs the same webinfer/llm (constraint compiled in
Pyodide, mask uploaded to WebGPU, applied in the sampler). A tiny random Llama with SmolLM2's vocabulary writes
text that matches only because of the mask; checked with `re.fullmatch`, `jsonschema` and `ast.parse`."""

from __future__ import annotations

import ast
import json
import re

import jsonschema
import pytest

pytestmark = pytest.mark.browser
PATTERN = r"(yes|no), [a-z]{2,8} [0-9]{1,3}\."
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0,
                                                                            "maximum": 99},
                                           "tag": {"enum": ["red", "green"]}}, "required": ["ok", "n", "tag"],
          "additionalProperties": False}
ARITH = 'root ::= term (("+" | "*") term)*\nterm ::= [1-9] [0-9]? | "(" root ")"\n'


def test_constrained_chat_in_the_page(page, tiny_site):
    (tiny_site["site"] / "constrain.html").write_text("<!doctype html><title>constrain</title>")
    page.goto(tiny_site["url"] + "constrain.html")
    cases = [{"regex": PATTERN, "temperature": 1.0, "seed": 2, "maxNewTokens": 40},
             {"jsonSchema": SCHEMA, "maxNewTokens": 60},
             {"jsonSchema": SCHEMA, "temperature": 1.0, "seed": 5, "maxNewTokens": 60},
             {"grammar": ARITH, "temperature": 1.0, "seed": 3, "maxNewTokens": 12}]
    got = page.evaluate("""async (cases) => {
        const webinfer = await import("./assets/webinfer.mjs");
        const chat = await webinfer.chat("chat/artifact/");
        const out = [];
        for (const opts of cases) {
          let text = "";
          for await (const t of chat.send([{ role: "user", content: "Answer:" }], opts)) text += t.text;
          out.push([text, chat.stats.token_ids.length]);
        }
        const err = await (async () => { try { for await (const _ of chat.send([{ role: "user", content: "x" }],
          { regex: "(a)\\\\1" })) {} return "generated"; } catch (e) { return e.message; } })();
        return [out, err]; }""", cases)
    (regex_text, _), (greedy, _), (sampled, _), (arith, n_arith) = got[0]
    assert re.fullmatch(PATTERN, regex_text), regex_text
    for text in (greedy, sampled):
        jsonschema.validate(json.loads(text), SCHEMA)
    assert re.fullmatch(r"[0-9+*()]+", arith), arith  # cut short or not, only the grammar's characters
    if n_arith < 12:  # ended by end-of-sequence, allowed only where the expression is complete
        ast.parse(arith, mode="eval")
    assert "backreferences" in got[1] and "\n" not in got[1].strip(), got[1]
