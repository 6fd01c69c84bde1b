"""Speculative decoding benchmark: plain vs speculative greedy decode tok/s, same session, same run.

Prompts that repeat their context (editing a given text, answering from a quoted passage, changing code) and
ordinary ones, through the model's chat template (SmolLM2-135M-Instruct's by default). For each prompt: a plain
greedy generation and a speculative one (prompt-lookup drafts, or ``--draft DRAFT.wi``); the token ids must be equal (printed if not),
and the decode tok/s of both (the time after the first token) and their ratio are printed, then each group's
total (tokens / decode seconds). Not a test: timings on a software GPU are noisy, compare the ratios.

    python benchmarks/speculative.py [--model smollm2|gemma3] [--artifact OUT.wi] [--draft-tokens 7]
                                     [--max-new-tokens 96]
"""

from __future__ import annotations

import argparse
import sys
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
    f"Repeat the following text exactly, then say 'done':\n\n{PARAGRAPH}",
    "Here is a shopping list: apples, bananas, cherries, dates, figs, grapes, lemons, mangoes, oranges. Write the "
    "whole list again with kiwis added at the end.",
    f"Add a docstring to each function in this code and print the whole code:\n\n{CODE}",
    "Correct the grammar of this sentence and write it out: The students was going to the library every days "
    "because they needs to study for they exams.",
]
ORDINARY = [
    "Write a short poem about the sea.",
    "What is the capital of France? Answer in two sentences.",
    "Explain in a few sentences why the sky is blue.",
]


def model_artifact(out: Path, model: str = "smollm2") -> Path:
    """The recipe's model int4 for generation (SmolLM2-135M-Instruct, or Gemma 3 270M with its 512-position
    sliding window as max_seq), rebuilt when webinfer's compiler changed."""
    import importlib

    from demos.build_cache import built

    recipe = importlib.import_module(f"demos.recipes.{model}")
    src = recipe.cache_dir()
    recipe.export_tokenizer(src)
    recipe.export_model(src)
    return built(src / "model.onnx", out, {"max_seq": getattr(recipe, "MAX_SEQ", 1024), "quantize": "int4"})[0]


def run(gen, prompt: str, n: int, **spec) -> tuple[list[int], float | None, dict]:
    gen.reset()
    ids = [t.id for t in gen.generate(gen.chat_ids([{"role": "user", "content": prompt}]), max_new_tokens=n,
                                      **spec)]
    return ids, gen.stats["decode_tok_s"], gen.stats


PAGE = """<pre id="out"></pre><script type="module">
import * as webinfer from "./assets/webinfer.mjs";
const out = document.getElementById("out");
try {
  const [groups, n, k] = JSON.parse(decodeURIComponent(location.hash.slice(1)));
  const chat = await webinfer.chat("chat/artifact/");
  const turn = async (content, extra) => {
    const ids = [];
    for await (const t of chat.send([{ role: "user", content }], { maxNewTokens: n, ...extra })) ids.push(t.id);
    return { ids, decode_tok_s: chat.stats.decode_tok_s, spec: chat.stats.speculative || null };
  };
  await turn("Hi", { maxNewTokens: 4 });
  await turn(groups[0][1].at(-1), { maxNewTokens: 16, speculative: "ngram", draftTokens: k });  // a verification
  const rows = [];
  for (const [group, prompts] of groups) {
    for (const p of prompts) {
      rows.push({ group, prompt: p, plain: await turn(p, {}),
                  spec: await turn(p, { speculative: "ngram", draftTokens: k }) });
    }
  }
  out.dataset.result = JSON.stringify({ rows });
} catch (e) {
  out.dataset.result = JSON.stringify({ error: String(e.message || e) });
}
</script>
"""


def browser(artifact: Path, groups, n: int, k: int) -> list[dict]:
    """The same comparison in headless Chromium, through the page's worker (webinfer.chat)."""
    import json
    import tempfile
    from urllib.parse import quote

    from playwright.sync_api import sync_playwright

    from benchmarks.browser import CHROMIUM, CHROMIUM_ARGS
    from webinfer.bundle import bundle
    from webinfer.serve import serve_in_thread

    with tempfile.TemporaryDirectory(prefix="speculative-") as tmp:
        site = Path(tmp) / "site"
        bundle(str(artifact), str(site), demo="chat")
        (site / "spec.html").write_text(PAGE)
        server, url = serve_in_thread(str(site))
        try:
            with sync_playwright() as pw:
                b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = b.new_page()
                page.goto(url + "spec.html#" + quote(json.dumps([groups, n, k])))
                page.wait_for_selector("#out[data-result]", state="attached", timeout=3_600_000)
                result = json.loads(page.locator("#out").get_attribute("data-result"))
                b.close()
        finally:
            server.shutdown()
            server.server_close()
    if "error" in result:
        raise SystemExit(f"browser: {result['error']}")
    return result["rows"]


def report(rows: list[dict]) -> None:
    """Per prompt and per group: plain vs speculative decode tok/s (rows as ``browser`` returns them)."""
    for group in dict.fromkeys(r["group"] for r in rows):
        print(f"\n{group} (Chromium):")
        sums = {"plain": [0, 0.0], "spec": [0, 0.0]}
        for r in (r for r in rows if r["group"] == group):
            for key in sums:
                tps, n = r[key]["decode_tok_s"], len(r[key]["ids"]) - 1
                if tps:
                    sums[key][0] += n
                    sums[key][1] += n / tps
            p, s = r["plain"]["decode_tok_s"] or 0.0, r["spec"]["decode_tok_s"] or 0.0
            sp = r["spec"]["spec"] or {}
            rate, cost = sp.get("acceptance_rate"), sp.get("verify_cost")
            print(f"  {r['prompt'][:48]!r:52} {len(r['spec']['ids']):3} tokens  plain {p:6.2f} tok/s  speculative "
                  f"{s:6.2f} tok/s  x{s / p if p else 0:4.2f}  acceptance {'-' if rate is None else f'{rate:.2f}'}"
                  f" ({sp.get('verify_steps')} verify + {sp.get('plain_steps')} plain steps, "
                  f"{sp.get('waited_steps', '-')} unchained, a verify "
                  f"~{cost or 0:.1f} plain){'' if r['plain']['ids'] == r['spec']['ids'] else '  IDS DIFFER'}")
        tp, ts = (sums[k][0] / sums[k][1] if sums[k][1] else 0.0 for k in ("plain", "spec"))
        print(f"  total: plain {tp:.2f} tok/s, speculative {ts:.2f} tok/s: x{ts / tp if tp else 0:.2f}")


def paired(gen, prompt: str, n: int, repeat: int, **spec):
    """Plain and speculative runs alternating, ``repeat`` of each; the fastest of each (the machine's load only
    ever slows a run down, and alternating exposes both to the same load)."""
    runs = [(run(gen, prompt, n), run(gen, prompt, n, **spec)) for _ in range(max(1, repeat))]
    return (max((r[0] for r in runs), key=lambda r: r[1] or 0.0), max((r[1] for r in runs), key=lambda r: r[1] or 0.0))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=("smollm2", "gemma3"), default="smollm2",
                   help="the recipe (demos/recipes) the artifact is built from")
    p.add_argument("--artifact", type=Path, help="where it is built (default build/bench-artifacts/MODEL-int4-spec.wi)")
    p.add_argument("--draft", type=Path, help="a draft model's artifact (default: prompt-lookup drafts)")
    p.add_argument("--draft-tokens", type=int, default=7,
                   help="7 (the default): 8 rows, one tile of the software class's int4 GEMM")
    p.add_argument("--min-ngram", type=int, default=3, help="prompt lookup: the shortest match that drafts")
    p.add_argument("--repeat", type=int, default=2, help="runs of each prompt per mode, alternating; the fastest "
                   "of each mode is kept")
    p.add_argument("--browser", action="store_true",
                   help="also in headless Chromium through the page's worker (prompt-lookup drafts)")
    p.add_argument("--browser-only", action="store_true")
    p.add_argument("--browser-tokens", type=int, default=48, help="max new tokens in Chromium (slower)")
    p.add_argument("--browser-all", action="store_true", help="every repeating-context prompt in Chromium (the "
                   "editing ones too), not only quoting and repeating")
    p.add_argument("--max-new-tokens", type=int, default=96)
    a = p.parse_args()
    from webinfer.llm.generate import Generator

    artifact = model_artifact(a.artifact or ROOT / "build" / "bench-artifacts" / f"{a.model}-int4-spec.wi", a.model)
    if a.browser or a.browser_only:
        groups = [["repeating context", REPEATING if a.browser_all else REPEATING[1:3]], ["ordinary", ORDINARY[:2]]]
        report(browser(artifact, groups, a.browser_tokens, a.draft_tokens))
        if a.browser_only:
            return 0
    gen = Generator.load(str(artifact))
    from webinfer.llm.speculative import NgramDrafter

    drafter = Generator.load(str(a.draft)) if a.draft else NgramDrafter(a.draft_tokens, min_ngram=a.min_ngram)
    spec = {"speculative": drafter, "draft_tokens": a.draft_tokens}
    print(f"adapter: {gen.core.device.facts().name}; kernel class {gen.core.choice.kernel_class}; drafts: "
          f"{a.draft or 'ngram'}, k = {a.draft_tokens}")
    run(gen, ORDINARY[0], 8)  # warm-up: every kernel's first dispatch compiles it
    # and a verification step of each draft length (its plan and pipelines), drafting on any match
    for k in sorted({a.draft_tokens, min(a.draft_tokens, 3)}):
        run(gen, REPEATING[2], 12, speculative=NgramDrafter(k, min_ngram=1, adaptive=False), draft_tokens=k)
    for group, prompts in (("repeating context", REPEATING), ("ordinary", ORDINARY)):
        print(f"\n{group}:")
        totals = {"plain": [0, 0.0], "spec": [0, 0.0]}
        for prompt in prompts:
            (want, plain_tps, st_p), (got, spec_tps, st) = paired(gen, prompt, a.max_new_tokens, a.repeat, **spec)
            for key, s, tps in (("plain", st_p, plain_tps), ("spec", st, spec_tps)):
                if tps:
                    totals[key][0] += len(s["token_ids"]) - 1
                    totals[key][1] += (len(s["token_ids"]) - 1) / tps
            sp = st["speculative"]
            rate = sp["acceptance_rate"]
            print(f"  {prompt[:48]!r:52} {len(got):3} tokens  plain {plain_tps:6.2f} tok/s  speculative "
                  f"{spec_tps:6.2f} tok/s  x{spec_tps / plain_tps:4.2f}  acceptance "
                  f"{'-' if rate is None else f'{rate:.2f}'} ({sp['verify_steps']} verify + {sp['plain_steps']} "
                  f"plain steps, {sp['waited_steps']} unchained, a verify ~{sp.get('verify_cost') or 0:.1f} plain){'' if got == want else '  IDS DIFFER'}")
        tp, ts = (totals[k][0] / totals[k][1] for k in ("plain", "spec"))
        print(f"  total: plain {tp:.2f} tok/s, speculative {ts:.2f} tok/s: x{ts / tp:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
