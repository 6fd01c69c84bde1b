"""Prompt-lookup drafts simulated over a model's real greedy answers: does the model copy what it edits?

No GPU and no webinfer session: transformers generates each model's greedy answer to benchmarks/speculative.py's
prompts through its chat template (on the CPU), then llm/lookup.py's NgramDrafter is run over prompt + answer
as agenerate_speculative runs it (``idle`` before a plain step's token is known, ``propose`` after it, a
verification accepting the leading draft tokens that equal the answer's). A verification is charged ``--cost``
plain steps (the loop's measure of it; stop 37: 2.2-2.4 of GPU time, 2-3.5 measured with the host's turn), so
``est x`` = tokens / (plain steps + gap x waited plain steps + cost x verifications) is the decode speed-up the
drafts would give. ``oracle``: the same for a clairvoyant drafter that copies the longest run of the answer found
anywhere in the context: no drafter that copies from the context can beat it. ``copyable``: the share of answer
tokens the longest >= 3-token earlier match predicts. Group totals: the editing prompts (spelling, list,
docstrings, grammar), quoting and repeating, the ordinary ones.

    python -m benchmarks.lookup_sim [--models smollm2,gemma3] [--ordinary] [--cost 2.3] [--save|--load F.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def simulate(prompt: list[int], answer: list[int], k: int, adaptive: bool, cost: float, gap: float,
             min_ngram: int = 3) -> dict:
    """agenerate_speculative's loop with a drafter and an oracle target (the answer's ids). ``gap``: what a
    plain step launched after its token was read costs more than a chained one (in plain steps)."""
    from webinfer.llm.lookup import NgramDrafter

    d = NgramDrafter(k, min_ngram=min_ngram, adaptive=adaptive)
    d.costs[k], d.warm = cost, {k, d.short}  # as measured by an earlier generation of the same session
    d.costs.setdefault(d.short, cost)
    history, out = list(prompt), [answer[0]]  # the prefill's token
    chained = d.idle(history) and len(answer) > 1
    history.append(answer[0])
    plain, verify, drafted, accepted, waited = 0, 0, 0, 0, 0
    while len(out) < len(answer):
        was_chained = chained
        draft = asyncio.run(d.propose(history)) if not chained else []
        chained = False
        if draft:
            want = answer[len(out):]
            n = 0
            while n < len(draft) and n < len(want) and draft[n] == want[n]:
                n += 1
            new = want[:n + 1]
            verify += 1
            drafted += len(draft)
            accepted += n
            d.observe(n, len(draft), cost)
        else:
            # a plain step; ask idle (before its token is known) whether the one after is chained
            plain += 1
            waited += not was_chained
            chained = d.idle(history) and len(out) + 2 <= len(answer)
            new = answer[len(out):len(out) + 1]
        for t in new:
            out.append(t)
            history.append(t)
    steps = plain + gap * waited + cost * verify  # the decode steps (after the prefill's first token)
    return {"verify": verify, "plain": plain, "waited": waited, "acc": accepted / drafted if drafted else None,
            "per_verify": (accepted + verify) / verify if verify else None, "est": (len(answer) - 1) / steps}


def oracle(prompt: list[int], answer: list[int], k: int, cost: float) -> float:
    """The best any drafter copying from the context could do: at each step it knows the longest run of the
    answer's next tokens found anywhere in prompt + output so far, and verifies it (up to k drafts, + 1 token)
    only when that gains more tokens than the step costs. The decode speed-up (est. as ``simulate``'s)."""
    history, i, steps = list(prompt) + answer[:1], 1, 0.0
    while i < len(answer):
        run = _longest_run(history, answer[i:i + k])
        if run + 1 > cost:
            steps, take = steps + cost, run + 1
        else:
            steps, take = steps + 1, 1
        history += answer[i:i + take]
        i += take
    return (len(answer) - 1) / steps if steps else 1.0


def _longest_run(history: list[int], want: list[int]) -> int:
    """The longest prefix of ``want`` that occurs contiguously in ``history``."""
    best = 0
    for j in range(len(history)):
        n = 0
        while n < len(want) and j + n < len(history) and history[j + n] == want[n]:
            n += 1
        best = max(best, n)
    return best


def copyable(prompt: list[int], answer: list[int], min_ngram: int = 3) -> float:
    from webinfer.llm.lookup import _longest_match

    hits, history = 0, list(prompt)
    for t in answer:
        n, end = _longest_match(history, 8)
        hits += n >= min_ngram and history[end + 1] == t
        history.append(t)
    return hits / len(answer)


def smollm2():
    import torch  # noqa: F401
    from transformers import AutoTokenizer

    from demos.recipes import smollm2 as r

    d = r.cache_dir()
    r.export_tokenizer(d)
    return r.load_torch_model(), AutoTokenizer.from_pretrained(d)


def gemma3():
    from transformers import AutoTokenizer

    from demos.recipes import gemma3 as r

    d = r.cache_dir()
    r.export_tokenizer(d)
    return r.load_torch_model(), AutoTokenizer.from_pretrained(d)


def answers(name: str, prompts: list[str], n: int) -> list[tuple[list[int], list[int], str]]:
    import torch

    model, tok = {"smollm2": smollm2, "gemma3": gemma3}[name]()
    rows = []
    for p in prompts:
        ids = tok.apply_chat_template([{"role": "user", "content": p}], tokenize=True, add_generation_prompt=True,
                                      return_dict=False)
        ids = list(ids["input_ids"] if isinstance(ids, dict) else ids)
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                 max_new_tokens=n, do_sample=False, pad_token_id=tok.eos_token_id)
        new = out[0, len(ids):].tolist()
        rows.append((ids, new, tok.decode(new, skip_special_tokens=True)))
        print(f"[{name}] {p[:40]!r}: {len(new)} tokens {rows[-1][2][:160]!r}", flush=True)
    return rows


def main() -> int:
    from benchmarks.speculative import ORDINARY, REPEATING

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="smollm2,gemma3")
    p.add_argument("--max-new-tokens", type=int, default=96)
    p.add_argument("--cost", type=float, default=2.3, help="a verification step in plain steps")
    p.add_argument("--gap", type=float, default=0.25, help="a plain step launched after its token was read costs "
                   "this much more (stop 34: a loop that waited for every token ran at 0.77-0.84x)")
    p.add_argument("--k", type=int, default=7)
    p.add_argument("--ordinary", action="store_true", help="the ordinary prompts too")
    p.add_argument("--save", type=Path, help="write the answers' ids here (JSON), to re-simulate without models")
    p.add_argument("--load", type=Path, help="simulate over saved answers")
    a = p.parse_args()
    prompts = REPEATING + (ORDINARY if a.ordinary else [])
    if a.load:
        data = json.loads(a.load.read_text())
    else:
        data = {m: answers(m, prompts, a.max_new_tokens) for m in a.models.split(",")}
        if a.save:
            a.save.write_text(json.dumps(data))
    modes = (("adaptive off", False), ("adaptive on", True))
    print(f"\nk = {a.k}, a verification = {a.cost} plain steps, a waited plain step {1 + a.gap}; per mode: "
          "verifications, plain steps (of them waited), acceptance, tokens a verification, est. speed-up")
    print(f"{'model':8} {'prompt':34} {'tok':>3} {'copy':>5} {'oracle':>6} | " + " | ".join(f"{m[0]:^36}" for m in modes))
    for m, rows in data.items():
        groups: dict[str, list[float]] = {}  # group -> [tokens, oracle steps, steps of each mode]
        for i, (prompt, (ids, new, _text)) in enumerate(zip(prompts, rows)):
            group = "quoting/repeating" if i in (1, 2) else "editing" if i < len(REPEATING) else "ordinary"
            cells, tot = [], groups.setdefault(group, [0.0] * (2 + len(modes)))
            best = oracle(ids, new, a.k, a.cost)
            tot[0] += len(new) - 1
            tot[1] += (len(new) - 1) / best
            for j, (_, adaptive) in enumerate(modes):
                s = simulate(ids, new, a.k, adaptive, a.cost, a.gap)
                tot[2 + j] += (len(new) - 1) / s["est"]
                acc = "-" if s["acc"] is None else f"{s['acc']:.2f}"
                per = "-" if s["per_verify"] is None else f"{s['per_verify']:.1f}"
                cells.append(f"{s['verify']:2}v {s['plain']:3}p({s['waited']:2}) {acc:>4} {per:>4}/v x{s['est']:.2f}")
            print(f"{m:8} {prompt[:34]!r:34} {len(new):3} {copyable(ids, new):5.2f} x{best:5.2f} | "
                  + " | ".join(cells))
        for g, tot in groups.items():
            print(f"{m:8} {'total: ' + g:34} {int(tot[0]):3}       x{tot[0] / tot[1]:5.2f} | "
                  + " | ".join(f"{'':29}x{tot[0] / t:.2f}" for t in tot[2:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
