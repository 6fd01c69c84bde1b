"""Speculative decoding benchmark: plain vs speculative greedy decode tok/s, same session, same run.

Prompts that repeat their context (editing a given text, answering from a quoted passage, changing code) and
ordinary ones, through SmolLM2-135M-Instruct's chat template. For each prompt: a plain greedy generation and a
speculative one (prompt-lookup drafts, or ``--draft DRAFT.wi``); the token ids must be equal (printed if not),
and the decode tok/s of both (the time after the first token) and their ratio are printed, then each group's
total (tokens / decode seconds). Not a test: timings on a software GPU are noisy, compare the ratios.

    python benchmarks/speculative.py [--artifact SMOLLM.wi] [--draft-tokens 4] [--max-new-tokens 96]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PARAGRAPH = ("The Amazon rainforest covers much of the Amazon basin of South America. This basin encompasses "
             "seven million square kilometres, of which five and a half million are covered by the rainforest. "
             "The region includes territory belonging to nine nations, and most of the forest is in Brazil.")
CODE = ("def total(items):\n    s = 0\n    for x in items:\n        if x > 0:\n            s = s + x\n"
        "    return s\n\n\ndef count(items):\n    n = 0\n    for x in items:\n        if x > 0:\n"
        "            n = n + 1\n    return n\n")
REPEATING = [
    "Fix the spelling in this text and write it out in full:\n" + PARAGRAPH.replace("covers", "coverss")
    .replace("territory", "teritory").replace("most", "moost"),
    f"Read the passage and answer by quoting the sentence that says how large the basin is.\n\n{PARAGRAPH}",
    f"Rename the variable x to value everywhere in this code and print the whole code:\n\n{CODE}",
    f"Repeat the following text exactly, then say 'done':\n\n{PARAGRAPH}",
]
ORDINARY = [
    "Write a short poem about the sea.",
    "What is the capital of France? Answer in two sentences.",
    "Explain in a few sentences why the sky is blue.",
]


def smollm_artifact(out: Path) -> Path:
    """SmolLM2-135M-Instruct int4 for generation (the recipe's ONNX, built once into ``out``)."""
    if (out / "manifest.json").is_file():
        return out
    import webinfer
    from demos.recipes import smollm2

    src = smollm2.cache_dir()
    smollm2.export_tokenizer(src)
    smollm2.export_model(src)
    t0 = time.perf_counter()
    webinfer.build(str(src / "model.onnx"), str(out), max_seq=1024, quantize="int4")
    print(f"built {out} in {time.perf_counter() - t0:.0f} s", flush=True)
    return out


def run(gen, prompt: str, n: int, **spec) -> tuple[list[int], float | None, dict]:
    gen.reset()
    ids = [t.id for t in gen.generate(gen.chat_ids([{"role": "user", "content": prompt}]), max_new_tokens=n,
                                      **spec)]
    return ids, gen.stats["decode_tok_s"], gen.stats


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--artifact", type=Path, default=ROOT / "build" / "bench-artifacts" / "smollm2-int4-spec.wi")
    p.add_argument("--draft", type=Path, help="a draft model's artifact (default: prompt-lookup drafts)")
    p.add_argument("--draft-tokens", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=96)
    a = p.parse_args()
    from webinfer.llm.generate import Generator

    gen = Generator.load(str(smollm_artifact(a.artifact)))
    spec = {"speculative": Generator.load(str(a.draft)) if a.draft else "ngram", "draft_tokens": a.draft_tokens}
    print(f"adapter: {gen.core.device.facts().name}; kernel class {gen.core.choice.kernel_class}; drafts: "
          f"{a.draft or 'ngram'}, k = {a.draft_tokens}")
    run(gen, ORDINARY[0], 8)  # warm-up: every kernel's first dispatch compiles it
    run(gen, REPEATING[0], 8, **spec)
    for group, prompts in (("repeating context", REPEATING), ("ordinary", ORDINARY)):
        print(f"\n{group}:")
        totals = {"plain": [0, 0.0], "spec": [0, 0.0]}
        for prompt in prompts:
            want, plain_tps, st_p = run(gen, prompt, a.max_new_tokens)
            got, spec_tps, st = run(gen, prompt, a.max_new_tokens, **spec)
            for key, s, tps in (("plain", st_p, plain_tps), ("spec", st, spec_tps)):
                if tps:
                    totals[key][0] += len(s["token_ids"]) - 1
                    totals[key][1] += (len(s["token_ids"]) - 1) / tps
            sp = st["speculative"]
            rate = sp["acceptance_rate"]
            print(f"  {prompt[:48]!r:52} {len(got):3} tokens  plain {plain_tps:6.2f} tok/s  speculative "
                  f"{spec_tps:6.2f} tok/s  x{spec_tps / plain_tps:4.2f}  acceptance "
                  f"{'-' if rate is None else f'{rate:.2f}'} ({sp['verify_steps']} verify + {sp['plain_steps']} "
                  f"plain steps){'' if got == want else '  IDS DIFFER'}")
        tp, ts = (totals[k][0] / totals[k][1] for k in ("plain", "spec"))
        print(f"  total: plain {tp:.2f} tok/s, speculative {ts:.2f} tok/s: x{ts / tp:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
