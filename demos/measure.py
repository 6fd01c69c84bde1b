"""Time the demo pages in headless Chromium: page load to ready with a cold cache (fresh browser context)
and a warm one (a second visit in the same context: Cache Storage holds the weights, the HTTP cache holds
Pyodide), plus, for chat, time to first token and decode tokens/s. Each visit also gives the CPU seconds the
browser's processes spent on it (``cpu_s``), which the machine's other load changes far less than wall time.

    python -m demos.measure [SITE=build/site] [--tokens 8]     (after `make site`)
    python -m demos.measure NEW_SITE --against OLD_SITE --rounds 3   (paired: see demos/measure_pair.py)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
PAGES = {
    "classify": ("classify/?image=sample.png", "#result"),
    "similarity": ("similarity/?a=" + quote("The cat sits on the mat.") + "&b=" + quote("A kitten rests on a rug."),
                   "#result"),
    "chat": ("chat/?prompt=" + quote("What is the capital of France?") + "&max_new_tokens={n}&greedy=1&seed=0",
             "#answer"),
}


def tree_cpu_s(root: int | None = None) -> dict[int, float]:
    """User + system CPU seconds of each live process below ``root`` (this process): the browser's."""
    root = os.getpid() if root is None else root
    parent, cpu = {}, {}
    tick = os.sysconf("SC_CLK_TCK")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(pid)] = int(fields[1])
        cpu[int(pid)] = (int(fields[11]) + int(fields[12])) / tick
    below = {root}
    for _ in range(16):  # (a process tree a few levels deep: repeat until nothing is added)
        more = {p for p, pp in parent.items() if pp in below} - below
        if not more:
            break
        below |= more
    return {p: cpu[p] for p in below if p != root}


def cpu_since(before: dict[int, float]) -> float:
    """CPU seconds the browser's processes spent since ``before`` (a process gone since is not counted)."""
    return sum(max(0.0, s - before.get(p, 0.0)) for p, s in tree_cpu_s().items())


def timeline_text(timings: dict) -> str:
    """A visit's phases (the CPU path's ``timings.timeline``: [start, end] ms since the page's worker started,
    onnxruntime's worker and Pyodide side by side) in order of start, e.g. ``ort_init 300-2160``."""
    phases = sorted((timings.get("timeline") or {}).items(), key=lambda kv: (kv[1][0], kv[1][1]))
    return "  ".join(f"{name} {a}-{b}" for name, (a, b) in phases)


def visit(page, url: str, selector: str) -> dict:
    cpu0 = tree_cpu_s()
    page.goto(url)
    page.wait_for_selector(f"{selector}[data-done]", state="attached", timeout=900_000)
    el = page.locator(selector)
    if el.get_attribute("data-error"):
        raise SystemExit(f"{url}: {el.get_attribute('data-error')}")
    out = {"timings": json.loads(el.get_attribute("data-timings"))}
    out["timings"]["cpu_s"] = round(cpu_since(cpu0), 2)
    if el.get_attribute("data-stats"):
        out["stats"] = json.loads(el.get_attribute("data-stats"))
    return out


def measure(site: str, tokens: int = 8, only: list[str] | None = None) -> list[dict]:
    """Cold and warm page-load-to-ready of each demo (``only``: a subset), one row per demo."""
    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(ROOT / "tests" / "browser"))
    from conftest import CHROMIUM, CHROMIUM_ARGS

    from webinfer.serve import serve_in_thread

    server, base = serve_in_thread(site)
    rows = []
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for name, (path, selector) in PAGES.items():
                if only and name not in only:
                    continue
                context = browser.new_context()
                page = context.new_page()
                url = base + path.format(n=tokens)
                cold, warm = visit(page, url, selector), visit(page, url, selector)
                context.close()
                row = {"demo": name, "cold_ready_s": cold["timings"]["ready_ms"] / 1000,
                       "warm_ready_s": warm["timings"]["ready_ms"] / 1000, "cold": cold["timings"],
                       "warm": warm["timings"]}
                if "stats" in warm:
                    row.update(ttft_s=warm["stats"]["ttft_s"], decode_tok_s=warm["stats"]["decode_tok_s"],
                               prefill_tok_s=warm["stats"]["prefill_tok_s"])
                rows.append(row)
                print(json.dumps(row), flush=True)
            browser.close()
    finally:
        server.shutdown()
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m demos.measure", description=__doc__.splitlines()[0])
    p.add_argument("site", nargs="?", default=str(ROOT / "build" / "site"))
    p.add_argument("--tokens", type=int, default=8, help="chat: tokens to generate")
    p.add_argument("--only", help="comma-separated subset of classify,similarity,chat")
    p.add_argument("--against", metavar="OLD_SITE", help="measure SITE and OLD_SITE in turns; report the ratios")
    p.add_argument("--rounds", type=int, default=3, help="with --against: visits of each site per demo")
    p.add_argument("--timeline", action="store_true", help="print each visit's phases (ms since the worker started)")
    args = p.parse_args(argv)
    if args.against:
        from demos.measure_pair import paired, report

        report(paired(args.site, args.against, args.rounds, args.only.split(",") if args.only else None, args.tokens,
                      args.timeline))
        return 0
    rows = measure(args.site, args.tokens, args.only.split(",") if args.only else None)
    print(f"\nload average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'demo':<11} {'cold ready':>10} {'warm ready':>10} {'TTFT':>7} {'decode':>11}")
    for r in rows:
        extra = (f"{r['ttft_s']:>6.2f}s {r['decode_tok_s']:>6.2f} tok/s" if "ttft_s" in r else "")
        print(f"{r['demo']:<11} {r['cold_ready_s']:>9.1f}s {r['warm_ready_s']:>9.1f}s {extra}")
        if args.timeline:
            for when in ("cold", "warm"):
                print(f"  {when}: {timeline_text(r[when]) or '(no timeline)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
