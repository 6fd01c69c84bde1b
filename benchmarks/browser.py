"""Browser engines in one headless Chromium: webinfer in Pyodide, webinfer's CPU path (the artifact's CPU model
through webinfer/site/cpu.mjs), onnxruntime-web with webgpu and wasm.

The site is a temporary folder of real files (hard links where the file system allows, else copies) of
Pyodide, onnxruntime-web, the models and artifacts: ``webinfer serve``'s server, which follows no link out
of a site, serves it on 127.0.0.1 with the COOP/COEP headers that let onnxruntime-web's wasm use threads.
Each job (engine x model) gets a fresh page in a fresh browser context, so its first-result time includes
the runtime's start and no cache of another job; each job's result is the runner's JSON, or an error that
becomes the cell's text (a page that does not load, a time-out, a crashed browser).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from urllib.parse import urlparse

from webinfer.web import browser_wheel, pyodide_dir

from . import spec as S
from .harness import first_line as _first_line

HERE = os.path.dirname(os.path.abspath(__file__))
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--enable-unsafe-webgpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
ORT_WEB_DIST = os.path.join(os.path.dirname(HERE), "web", "node_modules", "onnxruntime-web", "dist")
# onnxruntime-web's files the page loads: the webgpu build and the wasm binaries it picks from (not the maps).
ORT_FILES = ("ort.webgpu.min.mjs", "ort.wasm.min.mjs", "ort-wasm-")  # (ort.wasm: the CPU path's build)
READY_S = 60  # the page's own scripts loaded (bench.mjs, pyodide.mjs)
BOOT_S = 60  # a job's limit is the harness's plus this: each job starts its runtime in a fresh page


def _slug(name: str) -> str:
    return name.replace(" ", "-").lower()


def link_or_copy(src: str, dst: str) -> None:
    """A real file at ``dst`` with ``src``'s bytes: a hard link (free, even for an LLM's shards), else a copy."""
    src = os.path.realpath(src)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def _place_tree(src: str, dst: str, keep=lambda name: True) -> None:
    shutil.copytree(src, dst, copy_function=link_or_copy,
                    ignore=lambda folder, names: [n for n in names if not os.path.isdir(os.path.join(folder, n))
                                                  and not keep(n)])


def build_site(site: str, specs: list[S.ModelSpec]) -> dict[str, str]:
    """Pages, runner, wheel, Pyodide, onnxruntime-web, models and artifacts, all as files inside ``site``.
    Returns model name -> why its files could not be placed (its cells say so; the others run)."""
    os.makedirs(site, exist_ok=True)
    for name in ("bench.html", "bench.mjs", "wi_page.py"):
        shutil.copyfile(os.path.join(HERE, "web", name), os.path.join(site, name))
    shutil.copyfile(os.path.join(HERE, "runner.py"), os.path.join(site, "runner.py"))
    os.makedirs(os.path.join(site, "wi"), exist_ok=True)  # webinfer's CPU path, as pages load it
    site_js = os.path.join(os.path.dirname(HERE), "webinfer", "site")
    for name in sorted(os.listdir(site_js)):  # every page module: cpu.mjs's imports grow (weights, streams, sha256)
        if name.endswith(".mjs"):
            shutil.copyfile(os.path.join(site_js, name), os.path.join(site, "wi", name))
    _place_tree(pyodide_dir(), os.path.join(site, "pyodide"))
    _place_tree(ORT_WEB_DIST, os.path.join(site, "ort"), lambda n: n.startswith(ORT_FILES) and not n.endswith(".map"))
    wheel = browser_wheel(os.path.join(site, "wheels"))
    with open(os.path.join(site, "site.json"), "w") as f:
        json.dump({"wheel": "wheels/" + os.path.basename(wheel)}, f)
    for sub in ("models", "artifacts"):
        os.makedirs(os.path.join(site, sub), exist_ok=True)
    problems = {}
    for sp in specs:
        if sp.reference_error:
            continue
        try:
            model = os.path.join(site, "models", _slug(sp.name) + ".onnx")
            if not os.path.exists(model):
                link_or_copy(sp.onnx, model)
            if sp.artifact:
                _place_tree(sp.artifact, os.path.join(site, "artifacts", _slug(sp.name)))
        except (OSError, shutil.Error) as e:
            problems[sp.name] = f"not available: its files could not be put in the bench site: {_first_line(e)}"
    return problems


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


def run_page(browser, url: str, call: str, args, limit_s: float, log=print) -> dict:
    """``window[call](...args)`` in a fresh page of a fresh context: its JSON result, or ``{"error": why}``.

    The job runs in the page and the harness polls for its result: playwright's time-out is kept by its
    driver, so a page whose main thread never yields still ends in time; closing the context stops it."""
    context = browser.new_context()
    failed: list[str] = []
    try:
        page = context.new_page()
        # console errors go to the log, except onnxruntime-web's own warnings (it logs them as errors)
        page.on("console", lambda m: m.type == "error" and "[W:onnxruntime" not in m.text
                and log(f"[browser] {m.text[:300]}"))
        page.on("response", lambda r: r.status >= 400 and failed.append(f"{r.status} for {urlparse(r.url).path}"))
        page.on("pageerror", lambda e: failed.append(f"page error: {str(e).splitlines()[0][:200]}"))
        try:
            page.goto(url + "bench.html")
            status = page.wait_for_function("['ready', 'failed'].find((s) => s === document.getElementById("
                                            "'status').textContent)", timeout=READY_S * 1e3).json_value()
        except Exception as e:
            status = _first_line(e)
        if status != "ready":
            return {"error": f"the bench page did not load: {failed[0] if failed else status}"}
        page.evaluate("([call, args]) => { window.benchResult = null; window[call](...args).then("
                      "(r) => { window.benchResult = r; }, (e) => { window.benchResult = JSON.stringify("
                      "{error: String(e)}); }); }", [call, args])
        try:
            handle = page.wait_for_function("window.benchResult", timeout=limit_s * 1e3, polling=250)
        except Exception as e:
            if "Timeout" in type(e).__name__:
                return {"error": f"timed out: no result within {limit_s:.0f} s (start, load, warm-up, runs)"}
            raise
        return json.loads(handle.json_value())
    except Exception as e:  # a crashed page or browser: this cell says so, the next job goes on
        return {"error": f"browser: {_first_line(e)}"}
    finally:
        try:
            context.close()
        except Exception:
            pass


def run_browser(engines: list[str], specs: list[S.ModelSpec], settings, tmp: str, rows_for, unavailable,
                log) -> list[dict]:
    """Rows for the browser engines; a whole column says why when the browser cannot run at all."""
    def column(why: str) -> list[dict]:  # every cell of these columns: its own reason first, else ``why``
        return [r for e in engines for sp in specs for r in rows_for(e, sp, None, unavailable(e, sp) or why)]

    why = missing_parts()
    if why:
        return column(why)
    from playwright.sync_api import sync_playwright

    from webinfer.serve import serve_in_thread

    site = os.path.join(tmp, "site")
    try:
        problems = build_site(site, specs)
    except Exception as e:
        return column(f"not available: the bench site could not be built: {_first_line(e)}")
    rows = []
    server, url = serve_in_thread(site)
    try:
        with sync_playwright() as p:
            browser = None
            for engine in engines:
                t0 = time.perf_counter()
                for sp in specs:
                    reason = unavailable(engine, sp) or problems.get(sp.name)
                    if reason:
                        rows += rows_for(engine, sp, None, reason)
                        continue
                    result = None
                    if browser is None or not browser.is_connected():
                        try:
                            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                        except Exception as e:
                            browser, result = None, {"error": f"Chromium did not start: {_first_line(e)}"}
                    if result is None:
                        job = browser_job(sp, settings)
                        limit = (settings.llm_limit_s if sp.llm else settings.limit_s) + BOOT_S
                        if job.get("llm"):
                            job["llm"]["pair_steps"] = settings.pair_steps
                        call, args = (("benchWebinfer", [job]) if engine == "webinfer-pyodide" else
                                      ("benchWebinferCpu", [job]) if engine == "webinfer-cpu" else
                                      ("benchCpuPair", [job, settings.pair_rounds]) if engine == "cpu-vs-wasm"
                                      else ("benchOrt", [job, engine.rsplit("-", 1)[1]]))
                        if engine == "cpu-vs-wasm":  # two engines, each warmed up and run every round
                            limit = 2 * limit
                        result = run_page(browser, url, call, args, limit, log)
                    cell = rows_for(engine, sp, result)
                    rows += cell
                    log(f"{engine} {sp.name}: " + ", ".join(dict.fromkeys(
                        f"{r['metric']} {r['median']:.1f} {r['unit']}" if r["median"] is not None else str(r["error"])
                        for r in cell)))
                log(f"{engine}: {time.perf_counter() - t0:.0f} s")
            if browser is not None:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()
    return rows
