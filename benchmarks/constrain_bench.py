"""Constrained vs unconstrained decode speed in the same run, and the constraints' compile times.

    python benchmarks/constrain_bench.py ART.wi [--rounds 3] [--tokens 48]

ART: a generation artifact built with the token mask (e.g. SmolLM2: `webinfer build
~/.cache/webinfer/models/smollm2-135m-instruct/model.onnx -o smollm.wi --max-seq 512`). For each JSON Schema
of tests/llm/data/constrain_schemas.json: the automaton's compile time; then, alternating per round on the same
prompts (greedy), unconstrained decode tok/s and constrained decode tok/s, the first constrained round ("cold":
masks computed as new automaton states are met) apart from the later ones ("warm": masks cached per state).
Prints one line per schema and the ratios (target: constrained >= 0.8x unconstrained).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("artifact")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--cases", type=int, default=10, help="how many of the schemas")
    args = ap.parse_args()

    from webinfer.llm.constrain import (
        Constraint,
        grammar_constraint,
        json_schema_constraint,
        regex_constraint,
    )
    from webinfer.llm.constrain.vocab import Vocabulary
    from webinfer.llm.generate import Generator

    gen = Generator.load(args.artifact)
    t0 = time.perf_counter()
    Vocabulary.of(gen.tokenizer)
    print(f"vocabulary trie ({gen.tokenizer.vocab_size} tokens, once per tokenizer): "
          f"{time.perf_counter() - t0:.2f} s")
    t0 = time.perf_counter()
    grammar = grammar_constraint((ROOT / "tests/llm/data/json.gbnf").read_text(), gen.tokenizer)
    print(f"compile json.gbnf: {(time.perf_counter() - t0) * 1000:.1f} ms (rows filled lazily)")
    t0 = time.perf_counter()
    regex_constraint(r"[a-z]+@[a-z]+\.(com|org|net)", gen.tokenizer)
    print(f"compile an e-mail regex: {(time.perf_counter() - t0) * 1000:.1f} ms")
    del grammar
    cases = json.loads((ROOT / "tests/llm/data/constrain_schemas.json").read_text())[:args.cases]
    list(gen.chat([{"role": "user", "content": "Hi"}], max_new_tokens=4))  # pipelines compiled, plans made
    plain_all, cold_all, warm_all = [], [], []
    for i, case in enumerate(cases):
        c: Constraint = json_schema_constraint(case["schema"], gen.tokenizer)
        msgs = [{"role": "user", "content": case["prompt"]}]
        plain, cold, warm = [], None, []
        for r in range(args.rounds):
            list(gen.chat(msgs, max_new_tokens=args.tokens, stop_at_eos=False))
            plain.append(gen.stats["decode_tok_s"])
            list(gen.chat(msgs, max_new_tokens=args.tokens, constraint=c))
            rate = gen.stats["decode_tok_s"]
            if r == 0:
                cold = rate
            else:
                warm.append(rate)
        ids = list(gen.stats["token_ids"])
        cold_ms = _host_ms(json_schema_constraint(case["schema"], gen.tokenizer), ids, gen._mask_words)
        warm_ms = _host_ms(c, ids, gen._mask_words)
        p, w = statistics.median(plain), statistics.median(warm) if warm else cold
        plain_all.append(p)
        cold_all.append(cold)
        warm_all.append(w)
        print(f"schema {i}: compile {c.compile_s * 1000:6.1f} ms, {len(c.machine.rows):5d} states; decode tok/s "
              f"unconstrained {p:5.2f}, constrained cold {cold:5.2f} ({cold / p:.2f}x), warm {w:5.2f} "
              f"({w / p:.2f}x); host per token: {cold_ms:.1f} ms cold, {warm_ms:.2f} ms warm (step "
              f"{1000 / p:.0f} ms); {gen.stats['text'][:50]}")
    p = statistics.median(plain_all)
    print(f"median decode tok/s: unconstrained {p:.2f}; constrained cold {statistics.median(cold_all):.2f} "
          f"({statistics.median(cold_all) / p:.2f}x), warm {statistics.median(warm_all):.2f} "
          f"({statistics.median(warm_all) / p:.2f}x)")


def _host_ms(constraint, ids: list[int], n_words: int) -> float:
    """The host's cost per token of a constrained step (mask + advance), replaying ``ids`` without the GPU."""
    m = constraint.matcher()
    t0 = time.perf_counter()
    for i, token in enumerate(ids):
        m.mask(n_words)
        if i + 1 < len(ids) or not m.accepting():
            m.advance(token)
    return (time.perf_counter() - t0) * 1000 / max(len(ids), 1)


if __name__ == "__main__":
    main()
