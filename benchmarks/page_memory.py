"""The chat page's memory while it loads and answers, in headless Chromium: the worker's JS heap, the page's
main-thread heap and the Pyodide heap, sampled through the DevTools protocol.

A dedicated worker is no page target: the browser's CDP session attaches to it (Target.attachToTarget,
non-flat, so messages travel through Target.sendMessageToTarget). Its JS heap is V8's heap (Runtime.getHeapUsage
usedSize, what performance.memory.usedJSHeapSize reports on a page) plus its ArrayBuffers, where a whole shard
or a staged texture would sit: V8's external memory (getHeapUsage's backingStorageSize; it holds Pyodide's wasm
memory too, which is subtracted). Runtime.queryObjects lists no typed arrays, so they cannot be counted one by
one. The Pyodide heap is the byteLength of the worker's WebAssembly.Memory objects (queryObjects on
WebAssembly.Memory.prototype, run only once the page is ready: a function run in the worker while it loads is
avoided, and a wasm memory never shrinks). Used by benchmarks/page_1b.py."""

from __future__ import annotations

import json
import time
from pathlib import Path
from urllib.parse import quote

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless=new", "--no-sandbox", "--enable-unsafe-webgpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
LIMIT = 300 * 1024 * 1024
SIZES = """function() {
  let n = 0;
  for (const m of this) if (m instanceof WebAssembly.Memory) n = Math.max(n, m.buffer.byteLength);
  return n;
}"""


class WorkerProbe:
    """Runtime calls into the page's worker over the browser's CDP session (replies arrive as events, which
    Playwright's sync API dispatches while it waits: poll with page.wait_for_timeout)."""

    def __init__(self, browser, page, url_part: str):
        self.page = page
        self.cdp = browser.new_browser_cdp_session()
        self.replies: dict[int, dict] = {}
        self.next_id = 0
        self.cdp.on("Target.receivedMessageFromTarget", self._reply)
        target = None
        for _ in range(600):
            infos = self.cdp.send("Target.getTargets", {"filter": [{}]})["targetInfos"]
            target = next((t for t in infos if t["type"] == "worker" and url_part in t["url"]), None)
            if target:
                break
            page.wait_for_timeout(100)
        if target is None:
            raise RuntimeError(f"no worker whose URL has {url_part}")
        self.session = self.cdp.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": False})["sessionId"]

    def _reply(self, event):
        msg = json.loads(event["message"])
        if "id" in msg:
            self.replies[msg["id"]] = msg

    def call(self, method: str, params: dict | None = None, timeout_s: float = 60) -> dict:
        self.next_id += 1
        mid = self.next_id
        self.cdp.send("Target.sendMessageToTarget", {"sessionId": self.session,
                                                     "message": json.dumps({"id": mid, "method": method, "params": params or {}})})
        end = time.monotonic() + timeout_s
        while mid not in self.replies:
            if time.monotonic() > end:
                raise TimeoutError(f"worker: no reply to {method}")
            self.page.wait_for_timeout(20)
        msg = self.replies.pop(mid)
        if "error" in msg:
            raise RuntimeError(f"worker: {method}: {msg['error']}")
        return msg["result"]

    def objects(self, prototype: str) -> str:
        proto = self.call("Runtime.evaluate", {"expression": f"{prototype}.prototype"})["result"]["objectId"]
        found = self.call("Runtime.queryObjects", {"prototypeObjectId": proto})["objects"]["objectId"]
        self.call("Runtime.releaseObject", {"objectId": proto})
        return found

    def pyodide_heap(self) -> int:
        """Bytes of the largest wasm memory (Pyodide's heap)."""
        memories = self.objects("WebAssembly.Memory")
        got = self.call("Runtime.callFunctionOn", {"objectId": memories, "functionDeclaration": SIZES,
                                                   "returnByValue": True})
        self.call("Runtime.releaseObject", {"objectId": memories})
        if "exceptionDetails" in got:
            raise RuntimeError(f"worker: {got['exceptionDetails'].get('exception', {}).get('description')}")
        return got["result"]["value"]


def sample(probe: WorkerProbe, page_cdp, pyodide: bool) -> dict:
    """One sample (bytes): the worker's V8 heap, its external memory (ArrayBuffers and GPU buffers), the main
    thread's V8 heap and external memory, and (when `pyodide`) the Pyodide heap: that one runs a function in
    the worker, which is done only while it idles (a wasm memory never shrinks, so its size once the page is
    ready is its peak while loading)."""
    w = probe.call("Runtime.getHeapUsage")
    main = page_cdp.send("Runtime.getHeapUsage")
    return {"worker_heap": w["usedSize"], "worker_external": w.get("backingStorageSize", 0),
            "pyodide": probe.pyodide_heap() if pyodide else 0,
            "main_heap": main["usedSize"] + main.get("backingStorageSize", 0)}


def peaks(samples: list[dict]) -> dict:
    """The largest figure of each kind: worker_js is its V8 heap plus its external memory less the Pyodide heap
    (known from the first sample that read it: it only grows, so earlier samples subtract too little)."""
    out = {"worker_js": 0, "worker_heap": 0, "worker_external": 0, "pyodide": 0, "main_js": 0}
    for s in samples:
        out["pyodide"] = max(out["pyodide"], s["pyodide"])
    for s in samples:
        arrays = max(0, s["worker_external"] - (s["pyodide"] or 0))
        out["worker_js"] = max(out["worker_js"], s["worker_heap"] + arrays)
        out["worker_heap"] = max(out["worker_heap"], s["worker_heap"])
        out["worker_external"] = max(out["worker_external"], s["worker_external"])
        out["main_js"] = max(out["main_js"], s["main_heap"])
    return out


def mb(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def text(pk: dict) -> str:
    return (f"worker JS heap {mb(pk['worker_js'])} (V8 heap {mb(pk['worker_heap'])}, external memory "
            f"{mb(pk['worker_external'])} less the Pyodide heap where read), Pyodide heap {mb(pk['pyodide'])}, "
            f"main thread JS heap {mb(pk['main_js'])}")


def run_page(site: Path, prompt: str, tokens: int, log, every_ms: int = 500, timeout_s: float = 3600) -> dict:
    """Open the chat page of `site` with `prompt` (greedy, `tokens` new ids), sample memory until the answer is
    done, print the peaks while loading and over the whole run, then reload: the shards come from Cache Storage."""
    from playwright.sync_api import sync_playwright

    from webinfer.serve import serve_in_thread

    server, base = serve_in_thread(str(site))
    url = base + f"chat/?prompt={quote(prompt)}&max_new_tokens={tokens}&greedy=1&seed=0&path=gpu"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page()
            page.on("console", lambda m: m.type in ("error", "warning") and log(f"console {m.type}: {m.text}"))
            page_cdp = page.context.new_cdp_session(page)
            t0 = time.monotonic()
            page.goto(url)
            probe = WorkerProbe(browser, page, "worker.mjs")
            loading, answering, closed = [], [], False
            while True:
                state = page.evaluate("""() => ({ ready: !!document.body.dataset.ready,
                  done: !!document.querySelector('#answer[data-done]'), status: document.getElementById('status').textContent,
                  error: document.querySelector('[data-error]')?.dataset.error || null })""")
                if state["error"]:
                    raise RuntimeError(f"page: {state['error']}")
                # the first sample once ready closes the load
                closing = state["ready"] and not closed
                closed = closed or closing
                (answering if state["ready"] and not closing else loading).append(
                    sample(probe, page_cdp, closing or state["done"]))
                if len(loading) % 20 == 1 and not state["ready"]:
                    pk = peaks(loading)
                    log(f"page: {time.monotonic() - t0:.0f} s, {state['status']!r}; peaks so far: {text(pk)}")
                if state["done"]:
                    break
                if time.monotonic() - t0 > timeout_s:
                    raise TimeoutError("page: no answer in time")
                page.wait_for_timeout(every_ms)
            answer = page.locator("#answer")
            got = {k: json.loads(answer.get_attribute(f"data-{k}")) for k in ("token-ids", "prompt-ids", "stats")}
            timings = json.loads(page.locator("#history").get_attribute("data-timings"))
            load_pk, all_pk = peaks(loading), peaks(loading + answering)
            log(f"page: loaded in {timings.get('worker_ms', 0) / 1e3:.0f} s ({timings.get('weight_bytes', 0) / 1e6:.0f} MB "
                f"of weights in {timings.get('shards')} shards, {timings.get('shards_from_cache')} from the cache), "
                f"{len(loading)} samples while loading, {len(answering)} while answering")
            log(f"page: PEAK while loading: {text(load_pk)}")
            log(f"page: PEAK over the whole run: {text(all_pk)}")
            log(f"page: turn stats {got['stats'].get('ttft_s')} s to the first token, "
                f"{got['stats'].get('decode_tok_s')} tok/s")
            page.reload()
            page.wait_for_selector("body[data-ready]", state="attached", timeout=int(timeout_s * 1000))
            again = json.loads(page.locator("#history").get_attribute("data-timings"))
            log(f"page: reloaded: {again.get('shards_from_cache')} of {again.get('shards')} shards from Cache Storage, "
                f"weights in {again.get('weights_ms', 0) / 1e3:.0f} s")
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    under = all(load_pk[k] < LIMIT for k in ("worker_js", "pyodide", "main_js"))
    return {"prompt_ids": got["prompt-ids"], "token_ids": got["token-ids"], "load_peaks": load_pk,
            "run_peaks": all_pk, "under_300_mb": under, "reload": again, "samples": loading + answering,
            "load_samples": len(loading)}
