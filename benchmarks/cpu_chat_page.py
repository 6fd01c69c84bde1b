"""Chat decode speed in the page on the CPU path: the chat demo in headless Chromium WITHOUT WebGPU
(--disable-features=WebGPU), so webinfer.chat runs the artifact's CPU model on onnxruntime-web's wasm backend
(site/cpu-chat.mjs). Prints the page's decode tok/s (its own stats: tokens after the first / their time) and,
in the same run, onnxruntime CPU's greedy loop on the same prompt ids (demos/recipes/smollm2.py ort_greedy).
Also the site's size with and without the CPU path's files. Not a test: a shared machine is noisy.

    python -m benchmarks.cpu_chat_page [--site build/site] [--tokens 64]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--headless=new", "--no-sandbox", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic", "--disable-features=WebGPU"]


def site_sizes(site: Path) -> tuple[int, int]:
    """(bytes of the whole site, bytes of the CPU path's files: cpu-model.onnx assets and ort/)."""
    total = cpu = 0
    for path in site.rglob("*"):
        if path.is_file() and not path.is_symlink():
            n = path.stat().st_size
            total += n
            if path.name == "cpu-model.onnx" or "ort" in path.relative_to(site).parts[:1]:
                cpu += n
    return total, cpu


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--site", default=str(ROOT / "build" / "site"), help="a demo site (python -m demos.site)")
    p.add_argument("--tokens", type=int, default=64)
    args = p.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from demos.recipes.smollm2 import cache_dir, ort_greedy
    from webinfer.serve import serve_in_thread

    site = Path(args.site)
    if not (site / "chat" / "artifact" / "assets" / "cpu-model.onnx").is_file():
        sys.exit(f"{site}/chat carries no CPU model: build the site with `python -m demos.site {site}`")
    server, url = serve_in_thread(str(site))
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = browser.new_page()
            prompt = "Write a short story about a robot who learns to paint."
            page.goto(url + f"chat/?prompt={quote(prompt)}&max_new_tokens={args.tokens}&greedy=1")
            page.wait_for_selector("#answer[data-done]", state="attached", timeout=900_000)
            el = page.locator("#answer")
            if el.get_attribute("data-error"):
                sys.exit(f"the page failed: {el.get_attribute('data-error')}")
            stats = json.loads(el.get_attribute("data-stats"))
            path = json.loads(page.locator("#history").get_attribute("data-path"))
            timings = json.loads(el.get_attribute("data-timings"))
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    ids, ort_tok_s = ort_greedy(cache_dir() / "model.onnx", stats["prompt_ids"], len(stats["token_ids"]),
                                threads=os.cpu_count() or 2)
    print(f"path: {path['path']} ({path['why']}); ready in {timings.get('ready_ms')} ms")
    print(f"page (CPU path): {len(stats['prompt_ids'])} prompt tokens, ttft {stats['ttft_s']:.2f} s, decode "
          f"{stats['decode_tok_s']:.2f} tok/s over {len(stats['token_ids'])} tokens")
    print(f"onnxruntime CPU (same run, same ids): decode {ort_tok_s:.2f} tok/s; greedy ids equal: "
          f"{ids == stats['token_ids']}")
    total, cpu = site_sizes(site)
    print(f"site: {total / 2**20:.1f} MiB with the CPU path, {(total - cpu) / 2**20:.1f} MiB without "
          f"(CPU models + onnxruntime-web: {cpu / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
