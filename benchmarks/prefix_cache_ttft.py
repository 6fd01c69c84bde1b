"""First token on a revisit with a long system prompt, against a cold visit: the page's prefix cache
(webinfer/site/prefix_store.mjs) measured in headless Chromium on the chat demo page.

- cold: a fresh browser profile opens chat/?system=S&prompt=Q: the whole conversation (the ~500-token system
  prompt and the question) is prefilled; after the reply the worker stores the system prompt's KV cache;
- revisit: the same page reloaded in the same profile (Cache Storage kept), and, unless --no-restart, the browser
  closed and started again on the same profile directory: the worker restores the system prompt's positions
  and prefills only the question.
The figure is the page's own time from Send to the first token (data-first-token-ms: Cache Storage read,
restore, prefill, first decode), revisit / cold (target <= 0.2). Printed, not asserted: a software GPU on a
shared machine is noisy. Greedy ids of every visit are compared with the cold one's.

    python -m benchmarks.prefix_cache_ttft [--artifact DIR] [--system-tokens 500] [--no-restart]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Which rule is about the weather?"
TOPICS = ["the weather", "train timetables", "museum hours", "local food", "public holidays", "city parks",
          "bicycle hire", "river cruises", "opening times", "ticket prices", "street markets", "night buses"]


def system_prompt(tokens: int, count) -> str:
    """Numbered rules until the text is ``tokens`` tokens long (``count(text)`` counts them)."""
    rules = []
    while True:
        i = len(rules)
        rules.append(f"Rule {i + 1}: when asked about {TOPICS[i % len(TOPICS)]}, answer in one short, polite "
                     f"sentence and mention rule {i + 1}.")
        text = "You are a helpful travel assistant for a city guide. Follow these rules. " + " ".join(rules)
        if count(text) >= tokens:
            return text


def default_artifact() -> str:
    """SmolLM2 int4 (1024 positions, the pages' tiles), rebuilt when webinfer's compiler changed."""
    from demos.build_cache import built
    from demos.recipes import smollm2

    src = smollm2.cache_dir()
    smollm2.export_tokenizer(src)
    smollm2.export_model(src)
    out = ROOT / "build" / "artifacts" / "prefix-chat.wi"
    return str(built(src / "model.onnx", out, {"max_seq": 1024, "quantize": "int4", "tiles": "startup"})[0])


def visit(page, url: str | None) -> dict:
    if url:
        page.goto(url)
    else:
        page.reload()
    page.wait_for_selector("#answer[data-done]", state="attached", timeout=1_800_000)
    el = page.locator("#answer")
    if el.get_attribute("data-error"):
        raise SystemExit(f"the page failed: {el.get_attribute('data-error')}")
    stats = json.loads(el.get_attribute("data-stats"))
    return {"first_token_ms": int(el.get_attribute("data-first-token-ms")), "ttft_s": stats["ttft_s"],
            "token_ids": stats["token_ids"], "prompt_tokens": len(stats["prompt_ids"]),
            "reused": stats["reused_tokens"], "prefix_cache": stats.get("prefix_cache")}


def measure(artifact: str, system_tokens: int, restart: bool, tokens: int) -> dict:
    from playwright.sync_api import sync_playwright
    from tokenizers import Tokenizer

    from benchmarks.browser import CHROMIUM, CHROMIUM_ARGS
    from webinfer.bundle import bundle
    from webinfer.serve import serve_in_thread

    tok = Tokenizer.from_file(str(Path(artifact) / "assets" / "tokenizer.json"))
    system = system_prompt(system_tokens, lambda t: len(tok.encode(t, add_special_tokens=False).ids))
    rows = {}
    with tempfile.TemporaryDirectory(prefix="prefix-ttft-") as tmp:
        site = Path(tmp) / "site"
        bundle(artifact, str(site), demo="chat")
        server, base = serve_in_thread(str(site))
        url = base + f"chat/?system={quote(system)}&prompt={quote(QUESTION)}&max_new_tokens={tokens}&greedy=1"
        profile = str(Path(tmp) / "profile")
        try:
            with sync_playwright() as pw:
                ctx = pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = ctx.new_page()
                rows["cold"] = visit(page, url)
                print(json.dumps({"visit": "cold", **rows["cold"]}), flush=True)
                rows["reload"] = visit(page, None)
                print(json.dumps({"visit": "reload", **rows["reload"]}), flush=True)
                ctx.close()
                if restart:
                    ctx = pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                    rows["restart"] = visit(ctx.new_page(), url)
                    print(json.dumps({"visit": "restart", **rows["restart"]}), flush=True)
                    ctx.close()
        finally:
            server.shutdown()
            server.server_close()
    return {"system_tokens": len(tok.encode(system, add_special_tokens=False).ids), "rows": rows}


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT))
    p = argparse.ArgumentParser(prog="python -m benchmarks.prefix_cache_ttft", description=__doc__.splitlines()[0])
    p.add_argument("--artifact", help="a chat artifact with >= 600 cache positions (default: SmolLM2 int4, 1024)")
    p.add_argument("--system-tokens", type=int, default=500)
    p.add_argument("--tokens", type=int, default=8, help="tokens to generate per visit")
    p.add_argument("--no-restart", dest="restart", action="store_false", help="skip the browser restart visit")
    args = p.parse_args(argv)
    result = measure(args.artifact or default_artifact(), args.system_tokens, args.restart, args.tokens)
    rows = result["rows"]
    cold = rows["cold"]["first_token_ms"]
    print(f"\nsystem prompt {result['system_tokens']} tokens; conversation {rows['cold']['prompt_tokens']} tokens")
    print(f"{'visit':<8} {'first token':>12} {'ratio':>6} {'prefilled':>9}  prefix cache")
    for name, r in rows.items():
        pc = r["prefix_cache"] or {}
        same = "" if r["token_ids"] == rows["cold"]["token_ids"] else "  IDS DIFFER FROM THE COLD VISIT"
        print(f"{name:<8} {r['first_token_ms'] / 1000:>11.2f}s {r['first_token_ms'] / cold:>6.2f} "
              f"{r['prompt_tokens'] - r['reused']:>9}  {pc.get('status')} "
              f"{json.dumps({k: v for k, v in pc.items() if k != 'status'})}{same}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
