"""Time to first token of a chat turn with ~300 tokens of history in the KV cache, beside the same turn with no
history: natively (Generator.chat on wgpu-py) and in headless Chromium (webinfer.chat in its Web Worker).

Each turn sends the whole conversation; the cache holds the earlier turns, so only the new turn is prefilled:
- no history: a first conversation [Q'] fills the cache with the system prompt, then [Q] reuses it and
  prefills "Q" plus the template's few tokens (what a "New chat" costs on a warm page);
- with history: the conversation H (~300 tokens) fills the cache, then H + [Q] prefills the same new turn,
  attending over the history as well.
The ratio of the two (median of --repeats) is the figure; a cold turn (nothing cached, whole conversation
prefilled) is printed beside it natively. Not a test: software GPUs on a shared machine are noisy.

    python -m benchmarks.chat_ttft [--artifact build/artifacts/chat.wi] [--repeats 3] [--no-browser]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
Q = "What is the capital of France?"
Q_OTHER = "Which river flows through Paris?"
HISTORY = [
    {"role": "user", "content": "I am planning a first trip to Europe next spring, about ten days. Which cities "
                                "would you suggest, and how should I split the time between them?"},
    {"role": "assistant", "content": "For a first visit of ten days, three cities work well: Paris, Amsterdam and "
                                     "Berlin. Spend four days in Paris for the museums, the river walks and a day "
                                     "trip to Versailles; take the train to Amsterdam for three days of canals, the "
                                     "Rijksmuseum and a bicycle ride through the parks; finish with three days in "
                                     "Berlin for its history, its galleries and its food markets. Trains connect "
                                     "all three in a few hours, so you will not need to fly."},
    {"role": "user", "content": "That sounds good. What should I pack for the weather in April, and do I need "
                                "to book the museums in advance?"},
    {"role": "assistant", "content": "April is mild but changeable: pack layers, a light waterproof jacket, a "
                                     "warm sweater for the evenings and comfortable walking shoes, since you will "
                                     "walk a lot. Book the big museums ahead: the Louvre, the Musée d'Orsay and "
                                     "the Anne Frank House sell timed tickets that often run out days before. "
                                     "Smaller galleries and most churches need no booking. A rail pass is rarely "
                                     "cheaper than buying the three train tickets early, and booking them about a month ahead gives the "
                                     "best fares on the fast lines."},
]


def native(artifact: str, repeats: int) -> dict:
    from webinfer.llm.generate import Generator

    gen = Generator.load(artifact)
    history_tokens = len(gen.chat_ids(HISTORY))

    def turn(messages) -> dict:
        for _ in gen.chat(messages, max_new_tokens=2):
            pass
        st = gen.stats
        return {"ttft_s": st["ttft_s"], "prefilled": len(st["prompt_ids"]) - st["reused_tokens"],
                "context": len(st["prompt_ids"])}

    turn([{"role": "user", "content": "Hi"}])  # compile every pipeline
    rows = []
    for _ in range(repeats):
        turn([{"role": "user", "content": Q_OTHER}])
        fresh = turn([{"role": "user", "content": Q}])
        turn(HISTORY)
        hist = turn(HISTORY + [{"role": "user", "content": Q}])
        gen.reset()
        cold = turn(HISTORY + [{"role": "user", "content": Q}])
        rows.append({"fresh": fresh, "history": hist, "cold": cold})
    return {"history_tokens": history_tokens, "rows": rows}


PAGE = """<pre id="out"></pre><script type="module">
import * as webinfer from "./assets/webinfer.mjs";
const out = document.getElementById("out");
try {
  const [history, q, qOther, repeats] = JSON.parse(decodeURIComponent(location.hash.slice(1)));
  const chat = await webinfer.chat("chat/artifact/");
  const turn = async (messages) => {
    for await (const t of chat.send(messages, { maxNewTokens: 2 })) { /* streamed */ }
    const st = chat.stats;
    return { ttft_s: st.ttft_s, prefilled: st.prompt_ids.length - st.reused_tokens, context: st.prompt_ids.length };
  };
  await turn([{ role: "user", content: "Hi" }]);
  const rows = [];
  for (let i = 0; i < repeats; i++) {
    await turn([{ role: "user", content: qOther }]);
    const fresh = await turn([{ role: "user", content: q }]);
    await turn(history);
    const hist = await turn([...history, { role: "user", content: q }]);
    rows.push({ fresh, history: hist });
  }
  out.dataset.result = JSON.stringify({ rows, ready_ms: chat.timings.ready_ms });
} catch (e) {
  out.dataset.result = JSON.stringify({ error: String(e.message || e) });
}
</script>
"""


def browser(artifact: str, repeats: int) -> dict:
    from urllib.parse import quote

    from playwright.sync_api import sync_playwright

    from benchmarks.browser import CHROMIUM, CHROMIUM_ARGS
    from webinfer.bundle import bundle
    from webinfer.serve import serve_in_thread

    with tempfile.TemporaryDirectory(prefix="chat-ttft-") as tmp:
        site = Path(tmp) / "site"
        bundle(artifact, str(site), demo="chat")
        (site / "ttft.html").write_text(PAGE)
        server, url = serve_in_thread(str(site))
        try:
            with sync_playwright() as pw:
                b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = b.new_page()
                page.goto(url + "ttft.html#" + quote(json.dumps([HISTORY, Q, Q_OTHER, repeats])))
                page.wait_for_selector("#out[data-result]", state="attached", timeout=1_800_000)
                result = json.loads(page.locator("#out").get_attribute("data-result"))
                b.close()
        finally:
            server.shutdown()
            server.server_close()
    if "error" in result:
        raise SystemExit(f"browser: {result['error']}")
    return result


def summary(name: str, result: dict) -> str:
    rows = result["rows"]
    fresh = statistics.median(r["fresh"]["ttft_s"] for r in rows)
    hist = statistics.median(r["history"]["ttft_s"] for r in rows)
    last = rows[-1]
    text = (f"{name}: TTFT with {last['history']['context'] - last['history']['prefilled']} tokens cached "
            f"({last['history']['prefilled']} prefilled) {hist:.3f} s vs no history "
            f"({last['fresh']['prefilled']} prefilled of {last['fresh']['context']}) {fresh:.3f} s: "
            f"ratio {hist / fresh:.2f} (median of {len(rows)})")
    if "cold" in last:
        cold = statistics.median(r["cold"]["ttft_s"] for r in rows)
        text += f"; the same turn prefilled whole ({last['cold']['context']} tokens) {cold:.3f} s"
    return text


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT))
    p = argparse.ArgumentParser(prog="python -m benchmarks.chat_ttft", description=__doc__.splitlines()[0])
    p.add_argument("--artifact", default=str(ROOT / "build" / "artifacts" / "chat.wi"),
                   help="a chat artifact (default: make site's SmolLM2 int4)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-browser", action="store_true")
    args = p.parse_args(argv)
    if not (Path(args.artifact) / "manifest.json").is_file():
        raise SystemExit(f"{args.artifact}: no artifact (run `make site` or pass --artifact)")
    results = {"native": native(args.artifact, args.repeats)}
    print(summary("native (wgpu-py)", results["native"]), flush=True)
    if not args.no_browser:
        results["browser"] = browser(args.artifact, args.repeats)
        print(summary("browser (Chromium worker)", results["browser"]), flush=True)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
