"""``webinfer bench``: one invocation runs every model through every engine it can find and writes
bench.json (rows), bench.md (the table) and bench.png (a chart) into the output folder.

Engines (columns): webinfer natively on the default adapter and on SwiftShader, onnxruntime CPU and its
WebGPU plugin (native workers, see native.py); webinfer in Pyodide and onnxruntime-web webgpu/wasm in
headless Chromium (browser.py). A cell counts only when the engine's outputs match ORT CPU's.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
import time

from . import spec as S
from .native import SWIFTSHADER_ICD, prebuild_baseline, worker_command
from .roofline import model_work

NATIVE = ["webinfer", "webinfer-swiftshader", "ort-cpu", "ort-webgpu"]
# Also native, run only when asked for: the default adapter forced to one kernel class's program.
NATIVE_EXTRA = ["webinfer-software", "webinfer-gpu", "ort-cuda"]
BROWSER = ["webinfer-pyodide", "webinfer-cpu", "ort-web-webgpu", "ort-web-wasm"]
# Also in the browser: webinfer's CPU path and onnxruntime-web wasm in one page, timed in turns (bench.mjs
# benchCpuPair); its cells are the median and spread of the per-round speed ratios (>1: webinfer faster), the
# figure that stays meaningful on a loaded machine where two columns measured minutes apart do not.
PAIRED = ["cpu-vs-wasm"]
ENGINE_NAMES = {"webinfer": "webinfer", "webinfer-swiftshader": "webinfer", "ort-cpu": "onnxruntime CPU",
                "ort-webgpu": "onnxruntime WebGPU", "webinfer-pyodide": "webinfer (Pyodide)",
                "ort-web-webgpu": "onnxruntime-web webgpu", "ort-web-wasm": "onnxruntime-web wasm",
                "webinfer-software": "webinfer software class", "webinfer-gpu": "webinfer gpu class",
                "ort-cuda": "onnxruntime CUDA", "webinfer-cpu": "webinfer CPU path",
                "cpu-vs-wasm": "webinfer CPU path / onnxruntime-web wasm, paired (x, >1: webinfer faster)"}


def is_native(engine: str) -> bool:
    """A native engine, or a baseline one (``ENGINE@REV``: webinfer from a checkout of git revision REV)."""
    return engine.split("@")[0] in NATIVE + NATIVE_EXTRA


def with_baseline(engines: list[str], rev: str | None) -> list[str]:
    """Each native webinfer engine followed by the same engine running webinfer from revision ``rev``."""
    if not rev:
        return engines
    out = []
    for e in engines:
        out.append(e)
        if "@" not in e and e.startswith("webinfer") and is_native(e):
            out.append(f"{e}@{rev}")
    return out


def baseline_checkout(rev: str, log=print) -> tuple[str, str]:
    """(full commit id, folder holding that commit's files): ``git archive`` into the bench cache, once."""
    import io
    import tarfile

    from .native import REPO_ROOT

    r = subprocess.run(["git", "-C", REPO_ROOT, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        from webinfer.errors import WebinferError

        raise WebinferError(f"--baseline {rev!r}: not a commit of this repository")
    sha = r.stdout.strip()
    root = os.path.join(S.artifact_dir(), f"baseline-{sha[:12]}")
    src = os.path.join(root, "src")
    if not os.path.isfile(os.path.join(src, "webinfer", "__init__.py")):
        tar = subprocess.run(["git", "-C", REPO_ROOT, "archive", "--format=tar", sha], capture_output=True,
                             check=True).stdout
        os.makedirs(src, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(tar)) as t:
            t.extractall(src, filter="data")
        log(f"baseline {rev}: {sha[:12]} unpacked in {src}")
    return sha, root


BASELINE_ROUNDS = 3


class Settings:
    """Repetitions: ``quick`` keeps every cell but runs each fewer times."""

    def __init__(self, quick: bool):
        self.quick = quick
        self.baseline: dict[str, str] = {}  # revision -> its folder (baseline_checkout)
        # --quick: the budget bounds the runs; a fast model's median wants more than a handful of samples
        self.warmup, self.runs = (2, 30) if quick else (2, 10)
        self.decode_passes = 1 if quick else 3
        # Seconds of timed runs per model (after warm-up): slow engines get fewer samples, never none;
        # and the most a job may take in all before its cell says it timed out.
        self.budget_s, self.llm_budget_s = (3, 12) if quick else (60, 240)
        self.limit_s, self.llm_limit_s = (40, 60) if quick else (600, 1200)
        # cpu-vs-wasm: rounds in turns, and an LLM's decode steps per turn
        self.pair_rounds, self.pair_steps = (3, 8) if quick else (5, 16)


FIRST = ("first result", "ms", "first_result_ms")


def metrics(spec: S.ModelSpec) -> list[tuple[str, str, str]]:
    """(metric, unit, result key) per model: steady state, then the first result (load + first run; an
    LLM's first run is its first prefill)."""
    if spec.llm is None:
        return [("latency", "ms", "latency_ms"), FIRST]
    return [(f"prefill {len(spec.llm['prompt'])} tok", "ms", "prefill_ms"),
            (f"decode {len(spec.llm.get('decode', [])) or spec.llm.get('decode_tokens')} tok", "tok/s",
             "decode_tok_s"), FIRST]


def rows_for(engine: str, spec: S.ModelSpec, result: dict | None, error: str | None = None) -> list[dict]:
    """The rows of one cell group: times when the outputs matched, else the reason in ``error``."""
    where = "browser" if engine in BROWSER + PAIRED else "native"
    result = result or {}
    if error is None:
        error = result.get("error") or S.check_outputs(spec, result.get("outputs", {}), result.get("decode_steps"))
    rows = []
    # a paired cell: the per-round ratios of the steady-state figures (no first result: both engines are loaded)
    chosen = [(m, "x", k) for m, _, k in metrics(spec) if k != FIRST[2]] if engine in PAIRED else metrics(spec)
    for metric, unit, key in chosen:
        values = result.get(key) or []
        row = {"engine": engine, "where": where, "model": spec.name, "metric": metric, "unit": unit,
               "median": None, "min": None, "max": None, "error": error, "adapter": result.get("adapter", "")}
        if spec.work and key == "latency_ms":
            row["work"] = spec.work
        if key == "decode_tok_s" and error is None and result.get("decode_steps", 0) < len(spec.llm["decode"]):
            row["note"] = (f"{result.get('decode_steps')} decode steps a turn" if engine in PAIRED else
                           f"{result.get('decode_steps')} of {len(spec.llm['decode'])} tokens (time budget)")
        if error is None and not values:
            row["error"] = "no measurement"
        elif error is None:
            row.update(median=statistics.median(values), min=min(values), max=max(values), samples=len(values))
        rows.append(row)
    return rows


def unavailable(engine: str, spec: S.ModelSpec) -> str | None:
    """Why an engine cannot run a model at all (None: it can)."""
    if spec.reference_error:
        return spec.reference_error
    if spec.quantize and not engine.startswith("webinfer") and engine not in PAIRED:  # (the pair: source model)
        return f"not available: {spec.quantize} is a webinfer build option (no equivalent peer model)"
    if spec.artifact is None and (engine.startswith("webinfer") or engine in PAIRED):
        return spec.build_error or "not available: no artifact"
    if engine == "ort-cuda" and not _has_cuda_provider():
        return "not available: this onnxruntime has no CUDA provider (onnxruntime-gpu)"
    if engine.split("@")[0] == "webinfer-swiftshader" and not os.path.isfile(SWIFTSHADER_ICD):
        return f"not available: {SWIFTSHADER_ICD} missing (apt-get install chromium)"
    return None


def _has_cuda_provider() -> bool:
    try:
        import onnxruntime as ort
    except ImportError:
        return False
    return "CUDAExecutionProvider" in ort.get_available_providers()


def build_artifacts(specs: list[S.ModelSpec], log) -> None:
    """Compile each model (webinfer's int4 variant through ``build(quantize=...)`` when it exists)."""
    import inspect

    from webinfer.build import build

    root = S.artifact_dir()
    for sp in specs:
        if sp.artifact or sp.reference_error:
            continue
        out = os.path.join(root, sp.name.replace(" ", "-").lower())
        kwargs = {}
        if sp.quantize:
            if "quantize" not in inspect.signature(build).parameters:
                sp.build_error = f"not available: webinfer build --quantize {sp.quantize} has not landed"
                continue
            kwargs["quantize"] = sp.quantize
        t0 = time.perf_counter()
        try:
            build(sp.onnx, out, cpu=True, **kwargs)  # (cpu: the CPU path's column runs the artifact's CPU model)
            sp.artifact = out
            log(f"built {sp.name} in {time.perf_counter() - t0:.1f} s")
        except Exception as e:
            sp.build_error = f"build failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
            log(sp.build_error)


def native_results(engine: str, specs: list[S.ModelSpec], settings: Settings, tmp: str, log,
                   kernels: bool) -> dict:
    """One pass of the engine's worker over the models it can run: model name -> result."""
    jobs = []
    for sp in specs:
        if not unavailable(engine, sp):
            jobs.append(S.job(sp, settings))
            if "@" in engine:  # the baseline's worker builds the model with the baseline's compiler
                jobs[-1].update(quantize=sp.quantize,
                                baseline_cache=settings.baseline[engine.split("@", 1)[1]])
    # Kernel microbenchmarks: every webinfer adapter in a full run, the default one with --quick.
    if kernels and getattr(settings, "kernels", True) and "@" not in engine and (
            engine == "webinfer" or engine.startswith("webinfer") and not settings.quick):
        jobs.append({"model": "kernels", "kernels": True, "quick": settings.quick})
    if not jobs:
        return {}
    t0 = time.perf_counter()
    by_model = {r["model"]: r for r in run_worker(engine, jobs, settings, tmp)}
    log(f"{engine}: {time.perf_counter() - t0:.0f} s")
    return by_model


def native_rows(engine: str, specs: list[S.ModelSpec], rounds: list[dict]) -> list[dict]:
    """Rows from one or more passes (``rounds``) of an engine's worker: the samples of every pass together;
    a pass that failed reports its error."""
    rows = []
    for sp in specs:
        why = unavailable(engine, sp)
        if why:
            rows += rows_for(engine, sp, None, why)
            continue
        results = [r[sp.name] for r in rounds if sp.name in r]
        failed = [r for r in results if "error" in r]
        if failed or not results:
            rows += rows_for(engine, sp, failed[0] if failed else None)
            continue
        merged = dict(results[-1])
        for _, _, key in metrics(sp):
            merged[key] = [v for r in results for v in r.get(key) or []]
        rows += rows_for(engine, sp, merged)
    for r in rounds:
        if "kernels" in r:
            rows += kernel_rows(engine, r["kernels"])
    return rows


def run_natives(engines: list[str], specs: list[S.ModelSpec], settings: Settings, tmp: str, log) -> list[dict]:
    """Every native engine. With a baseline revision among them, the workers run ``BASELINE_ROUNDS`` passes,
    alternating their order, and each cell pools its samples: a ratio of two engines timed one after the
    other on a shared software GPU otherwise follows the load, not the code (--quick: 0.71x and 1.19x in two
    runs of the same pair)."""
    passes = BASELINE_ROUNDS if any("@" in e for e in engines) else 1
    results: dict[str, list[dict]] = {e: [] for e in engines}
    for i in range(passes):
        for engine in engines if i % 2 == 0 else engines[::-1]:
            try:
                result = native_results(engine, specs, settings, tmp, log, kernels=i == 0)
            except Exception as e:  # the worker could not even start: each of its cells says why
                why = f"worker did not start: {first_line(e)}"
                result = {sp.name: {"model": sp.name, "error": why} for sp in specs}
            results[engine].append(result)
    return [row for e in engines for row in native_rows(e, specs, results[e])]


def job_limit(job: dict, settings: Settings) -> float:
    """Wall seconds one job may take, session creation and warm-up included."""
    return settings.llm_limit_s if job.get("llm") or job.get("kernels") else settings.limit_s


def run_worker(engine: str, jobs: list[dict], settings: Settings, tmp: str) -> list[dict]:
    """Results of ``jobs`` from the engine's worker. A job past its limit is reported as timed out and the
    worker restarted on the jobs after it; a worker that dies reports its stderr's last line."""
    results, pending, attempt = [], list(jobs), 0
    while pending:
        attempt += 1
        jobs_path, out_path = (os.path.join(tmp, f"{engine}-{attempt}-{n}.json") for n in ("jobs", "out"))
        with open(jobs_path, "w") as f:
            json.dump(pending, f)
        root = settings.baseline.get(engine.split("@", 1)[1]) if "@" in engine else None
        cmd, env = worker_command(engine, jobs_path, out_path, os.path.join(root, "src") if root else None)
        err_path = out_path + ".stderr"
        with open(err_path, "w") as err:
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        done, started = 0, time.perf_counter()
        while proc.poll() is None:
            time.sleep(0.5)
            n = len(_load(out_path))
            if n > done:
                done, started = n, time.perf_counter()
            if done < len(pending) and time.perf_counter() - started > job_limit(pending[done], settings):
                proc.kill()
                proc.wait()
                break
        finished = _load(out_path)
        results += finished
        if len(finished) == len(pending):
            break
        stuck = pending[len(finished)]
        if proc.returncode is not None and proc.returncode < 0:
            why = f"timed out: no result within {job_limit(stuck, settings):.0f} s (session, warm-up, runs)"
        else:
            why = f"worker failed: {_last_line(open(err_path).read())}"
        results.append({"model": stuck["model"], "error": why})
        pending = pending[len(finished) + 1:]
    return results


def kernel_rows(engine: str, result: dict) -> list[dict]:
    if "error" in result:
        return [{"engine": engine, "where": "native", "model": "kernels", "metric": "all", "unit": "",
                 "median": None, "min": None, "max": None, "error": result["error"], "adapter": ""}]
    return [{"engine": engine, "where": "native", "adapter": result.get("adapter", ""), **r}
            for r in result["rows"]]


def first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:200] if text else ''}"


def _load(path: str) -> list:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return []


def _last_line(text: str) -> str:
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"


def run(out_dir: str, quick: bool = False, engines: list[str] | None = None,
        specs: list[S.ModelSpec] | None = None, kernels: bool = True, log=print,
        baseline: str | None = None, models: list[str] | None = None) -> list[dict]:
    """Run the benchmark; returns the rows and writes bench.json, bench.md and bench.png in ``out_dir``.

    ``baseline``: a git revision; each native webinfer engine also runs webinfer as of that revision (its
    own compiler and runtime, from ``git archive``) in the same run, so figures compare under one load."""
    from .report import write_all

    t_start = time.perf_counter()
    settings = Settings(quick)
    settings.kernels = kernels
    unknown = [e for e in engines or [] if not is_native(e) and e not in BROWSER + PAIRED]
    if unknown:
        from webinfer.errors import WebinferError

        raise WebinferError(f"unknown engine {unknown[0]!r}: choose from "
                            f"{', '.join(NATIVE + NATIVE_EXTRA + BROWSER + PAIRED)} (ENGINE@REV for a baseline)")
    engines = with_baseline(engines or NATIVE + BROWSER + PAIRED, baseline)
    for rev in {e.split("@", 1)[1] for e in engines if "@" in e}:
        settings.baseline[rev] = baseline_checkout(rev, log)[1]
    specs = specs if specs is not None else S.default_models(quick)
    if models:  # names contain one of these (case-insensitive)
        specs = [sp for sp in specs if any(m.lower() in sp.name.lower() for m in models)]
    for sp in specs:
        try:
            S.prepare(sp)
            if sp.llm is None and sp.quantize is None:
                sp.work = model_work(sp.onnx, sp.feeds)
        except Exception as e:  # no reference, no check: every cell of the model says why
            sp.reference_error = f"no reference: onnxruntime CPU failed: {first_line(e)}"
            log(f"{sp.name}: {sp.reference_error}")
    log(f"references from onnxruntime CPU: {time.perf_counter() - t_start:.0f} s")
    build_artifacts(specs, log)
    for rev, root in settings.baseline.items():  # the baseline's builds, before any timed pass
        prebuild_baseline(f"webinfer@{rev}", [dict(S.job(sp, settings), quantize=sp.quantize, baseline_cache=root)
                                              for sp in specs if sp.artifact], root, log)
    rows = []
    with tempfile.TemporaryDirectory(prefix="webinfer-bench-") as tmp:
        rows += run_natives([e for e in engines if is_native(e)], specs, settings, tmp, log)
        browser_engines = [e for e in engines if e in BROWSER + PAIRED]
        if browser_engines:
            from .browser import run_browser

            try:
                rows += run_browser(browser_engines, specs, settings, tmp, rows_for, unavailable, log)
            except Exception as e:  # the browser pass broke down as a whole: its cells say why
                why = f"browser: {first_line(e)}"
                rows += [r for eng in browser_engines for sp in specs for r in rows_for(eng, sp, None, why)]
    os.makedirs(out_dir, exist_ok=True)
    wall = time.perf_counter() - t_start
    write_all(rows, out_dir, wall, ENGINE_NAMES)
    log(f"wrote {out_dir}/bench.json, bench.md, bench.png in {wall:.0f} s")
    return rows
