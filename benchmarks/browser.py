"""Browser engines in one headless Chromium: webinfer in Pyodide, onnxruntime-web with webgpu and wasm.

The site is a temporary folder of symlinks (Pyodide and onnxruntime-web from web/node_modules, the models
and artifacts) served on 127.0.0.1 by ``webinfer serve``'s server, with the COOP/COEP headers that let
onnxruntime-web's wasm use threads. One page per engine; each job's result is the runner's JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import time

from webinfer.web import browser_wheel, pyodide_dir

from . import spec as S

HERE = os.path.dirname(os.path.abspath(__file__))
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--enable-unsafe-webgpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
ORT_WEB_DIST = os.path.join(os.path.dirname(HERE), "web", "node_modules", "onnxruntime-web", "dist")


def _slug(name: str) -> str:
    return name.replace(" ", "-").lower()


def build_site(site: str, specs: list[S.ModelSpec]) -> None:
    """Pages, runner, wheel, and links to Pyodide, onnxruntime-web, models and artifacts."""
    os.makedirs(site, exist_ok=True)
    for name in ("bench.html", "bench.mjs", "wi_page.py"):
        shutil.copyfile(os.path.join(HERE, "web", name), os.path.join(site, name))
    shutil.copyfile(os.path.join(HERE, "runner.py"), os.path.join(site, "runner.py"))
    os.symlink(pyodide_dir(), os.path.join(site, "pyodide"))
    os.symlink(ORT_WEB_DIST, os.path.join(site, "ort"))
    wheel = browser_wheel(os.path.join(site, "wheels"))
    with open(os.path.join(site, "site.json"), "w") as f:
        json.dump({"wheel": "wheels/" + os.path.basename(wheel)}, f)
    for sub in ("models", "artifacts"):
        os.makedirs(os.path.join(site, sub))
    for sp in specs:
        link = os.path.join(site, "models", _slug(sp.name) + ".onnx")
        if not os.path.exists(link):
            os.symlink(sp.onnx, link)
        if sp.artifact:
            os.symlink(sp.artifact, os.path.join(site, "artifacts", _slug(sp.name)))


def browser_job(sp: S.ModelSpec, settings) -> dict:
    job = S.job(sp, settings)
    job["onnx"] = f"models/{_slug(sp.name)}.onnx"
    job["artifact"] = f"artifacts/{_slug(sp.name)}/" if sp.artifact else None
    return job


def missing_parts() -> str | None:
    if not os.path.exists(CHROMIUM):
        return f"not available: {CHROMIUM} missing (apt-get install chromium)"
    if not os.path.isdir(ORT_WEB_DIST):
        return "not available: web/node_modules/onnxruntime-web missing (npm ci --prefix web)"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "not available: playwright is not installed"
    return None


def _evaluate(page, call: str, args, timeout_s: float) -> dict:
    """Await ``call`` in the page, racing a timer in the page itself (playwright's sync API cannot be
    interrupted from another thread); after a time-out the caller closes the page, stopping the work."""
    race = (f"(args) => Promise.race([({call})(args), new Promise((ok) => setTimeout(() => ok(JSON.stringify("
            f"{{error: 'timed out: one run passed {timeout_s:.0f} s', timed_out: true}})), {int(timeout_s * 1e3)}))])")
    try:
        return json.loads(page.evaluate(race, args))
    except Exception as e:
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}", "timed_out": True}


def _open(browser, url: str):
    page = browser.new_page()
    page.on("console", lambda m: m.type == "error" and print(f"[browser] {m.text[:300]}"))
    page.goto(url + "bench.html")
    page.wait_for_function("document.getElementById('status').textContent === 'ready'")
    return page


def run_browser(engines: list[str], specs: list[S.ModelSpec], settings, tmp: str, rows_for, unavailable,
                log) -> list[dict]:
    """Rows for the browser engines; a whole column says why when the browser cannot run at all."""
    rows = []
    why = missing_parts()
    if why:
        return [r for e in engines for sp in specs for r in rows_for(e, sp, None, why)]
    from playwright.sync_api import sync_playwright

    from webinfer.serve import serve_in_thread

    site = os.path.join(tmp, "site")
    build_site(site, specs)
    server, url = serve_in_thread(site)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for engine in engines:
                t0 = time.perf_counter()
                page = _open(browser, url)
                for sp in specs:
                    reason = unavailable(engine, sp)
                    if reason:
                        rows += rows_for(engine, sp, None, reason)
                        continue
                    if page.is_closed():  # a job timed out: a fresh page for the next one
                        page = _open(browser, url)
                    job = browser_job(sp, settings)
                    limit = settings.llm_limit_s if sp.llm else settings.limit_s
                    if engine == "webinfer-pyodide":
                        result = _evaluate(page, "job => window.benchWebinfer(job)", job, limit)
                    else:
                        ep = engine.rsplit("-", 1)[1]
                        result = _evaluate(page, "([job, ep]) => window.benchOrt(job, ep)", [job, ep], limit)
                    if result.get("timed_out"):
                        page.close()
                    rows += rows_for(engine, sp, result)
                    log(f"{engine} {sp.name}: {rows[-1]['median'] or rows[-1]['error']}")
                if not page.is_closed():
                    page.close()
                log(f"{engine}: {time.perf_counter() - t0:.0f} s")
            browser.close()
    finally:
        server.shutdown()
    return rows
