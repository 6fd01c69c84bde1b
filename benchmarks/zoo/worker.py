"""One zoo model, in its own process: ``python -m benchmarks.zoo.worker ID [--target T] [--cache DIR]``.

Builds the model as it is (no dims fixed), runs it natively, runs onnxruntime CPU on the same feeds and prints
one JSON line (prefixed ``ZOO-RESULT``) with the figures of the table. A mismatch where onnxruntime's optimized
and unoptimized runs differ too is checked node by node (``judge_mismatch``, localize.py). A process per model
keeps one hang or driver crash from stopping the others (the parent kills it at its time-out).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ZOO_JSON = Path(__file__).with_name("models.json")
TOLERANCE = 1e-3  # max abs error <= TOLERANCE x max abs of onnxruntime's output; integer outputs exact
MARK = "ZOO-RESULT "


def load_zoo() -> dict:
    return json.loads(ZOO_JSON.read_text())


def default_cache() -> Path:
    return Path(os.environ.get("WEBINFER_CACHE", Path.home() / ".cache" / "webinfer")) / "zoo"


def one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def steady(fn, budget_s: float = 6.0, most: int = 20) -> float:
    """Median seconds of repeated warm calls: at least 3, at most ``most``, within about ``budget_s``."""
    times, t_end = [], time.perf_counter() + budget_s
    while len(times) < 3 or (len(times) < most and time.perf_counter() < t_end):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def compare(got, want) -> tuple[float, str | None]:
    """(relative error, why not equal or None) of one output against onnxruntime's."""
    if isinstance(want, list) and all(isinstance(w, dict) for w in want):  # ZipMap: a {label: score} dict per row
        if not isinstance(got, list) or len(got) != len(want) or any(set(g) != set(w) for g, w in zip(got, want)):
            return float("inf"), "maps with other labels or rows than onnxruntime's"
        got = [[g[k] for k in w] for g, w in zip(got, want)]
        want = [list(w.values()) for w in want]
    want = np.asarray(want)
    if want.dtype.kind in "OUS":  # string labels: equal or not
        bad = int((np.asarray(got).astype(str) != want.astype(str)).sum())
        return (0.0, None) if bad == 0 else (float(bad) / max(1, want.size), f"{bad} of {want.size} labels differ")
    got = np.asarray(got)
    if got.shape != want.shape:
        return float("inf"), f"shape {list(got.shape)} != onnxruntime {list(want.shape)}"
    if want.dtype.kind in "iub":
        bad = int((got.astype(np.int64) != want.astype(np.int64)).sum())
        return (0.0, None) if bad == 0 else (float(bad) / max(1, want.size), f"{bad} of {want.size} values differ")
    if want.size == 0:
        return 0.0, None
    if not np.isfinite(got).all() and np.isfinite(want).all():
        return float("inf"), "non-finite values where onnxruntime's are finite"
    peak = float(np.abs(want).max())
    err = float(np.abs(got.astype(np.float64) - want).max())
    rel = err / peak if peak > 0 else err
    return rel, (None if rel <= TOLERANCE else f"relative error {rel:.3g} > {TOLERANCE:g}")


def run_model(model_id: str, target: str, cache: Path) -> dict:
    import onnx
    import onnxruntime as ort

    from benchmarks.zoo.inputs import Recipes

    zoo = load_zoo()
    entry = next(m for m in zoo["models"] if m["id"] == model_id)
    path = cache / "models" / f"{model_id}.onnx"
    proto = onnx.load(str(path))
    row = {"id": model_id, "task": entry["task"], "nodes": len(proto.graph.node),
           "opset": next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)}

    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = Recipes(cache).make(entry, ref.get_inputs())
    names = [o.name for o in ref.get_outputs()]
    want = ref.run(names, feeds)
    row["ort_ms"] = 1000 * steady(lambda: ref.run(names, feeds))
    row["status"] = "internal error"
    try:
        from webinfer.errors import WebinferError
    except ImportError:  # pragma: no cover
        WebinferError = ()  # noqa: N806
    with tempfile.TemporaryDirectory(prefix="zoo-") as tmp:
        stage = "build"
        try:
            from webinfer.build import build
            from webinfer.runtime.inference import InferenceSession

            t0 = time.perf_counter()
            manifest = build(str(path), tmp, target=target)
            row["build_s"] = time.perf_counter() - t0
            stage = "run"
            t0 = time.perf_counter()
            session = InferenceSession(tmp)
            got = session.run(names, feeds)
            row["first_run_s"] = time.perf_counter() - t0
            row["kernel_class"] = session.choice.kernel_class
            row["kernels"] = kernel_count(manifest, session.choice.kernel_class)
            row["steady_ms"] = 1000 * steady(lambda: session.run(names, feeds))
        except WebinferError as e:
            row["status"], row["error"] = "refused", f"{stage}: {one_line(e)}"
            return row
        except Exception as e:  # a bug of webinfer's: shown as such in the table
            row["error"] = f"{stage}: {type(e).__name__}: {one_line(e)}"
            return row
    errors, worst = [], 0.0
    for name, g, w in zip(names, got, want):
        rel, why = compare(g, w)
        worst = max(worst, rel)
        if why:
            errors.append(f"output {name}: {why}")
    row["rel_err"] = worst
    row["status"] = "ok" if not errors else "mismatch"
    if errors:
        row["error"] = "; ".join(errors)[:300]
        if np.isfinite(worst):
            judge_mismatch(row, proto, str(path), names, feeds, got, want, target)
    return row


def judge_mismatch(row: dict, proto, path: str, names, feeds, got, want, target: str) -> None:
    """A mismatch where onnxruntime disagrees with itself: the model is ill-conditioned; check it node by node.

    onnxruntime with its graph optimizations off (no QDQ fusions into int8 kernels), and onnxruntime on the float
    inputs times 1 + 1e-6 noise (rounding level), are second references; when either differs by more than the
    tolerance, output errors say nothing and ``localize`` decides: every node equal to onnxruntime on webinfer's
    own inputs (within what rounding noise moves that node) is ``unstable`` (not a webinfer bug), else the first
    wrong node. A model that builds quickly is checked so too (an LSTM rounding H to uint8 every step diverges
    from a 1-ulp change inside one node, where integer inputs leave nothing to perturb at the model's inputs).
    """
    import onnxruntime as ort

    from benchmarks.zoo.localize import first_wrong, localize, perturbed

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    plain = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(names, feeds)
    noisy = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(names, perturbed(feeds, 1))
    spread = max(compare(p, w)[0] for p, w in zip(plain + noisy, want + want))
    row["ort_spread"] = spread
    if not spread > TOLERANCE and not row.get("build_s", 1e9) < 30:
        return
    vs_plain = max(compare(g, p)[0] for g, p in zip(got, plain))
    try:
        rows = localize(proto, feeds, target)
    except Exception as e:  # the check is a diagnosis; the row stays a mismatch
        row["error"] += f"; node check failed: {type(e).__name__}: {one_line(e)}"[:200]
        return
    if not rows:  # not checkable (subgraphs), or no float value to check (a forest's labels and maps)
        return
    bad = first_wrong(rows)
    if bad is not None:
        row["error"] = f"{row['error']}; first wrong node: {bad['op']} (relative error {bad['rel']:.3g})"[:400]
        return
    row["status"] = "unstable"
    worst_node = max((r["rel"] for r in rows), default=0.0)
    moved = max((r.get("spread", 0.0) for r in rows), default=0.0)
    row["error"] = (f"onnxruntime's unoptimized run or rounding noise on the inputs moves its output by {spread:.3g} of "
                    f"the scale, webinfer by {row['rel_err']:.3g} and {vs_plain:.3g}; each of {len(rows)} node outputs "
                    f"equals onnxruntime's on webinfer's inputs or is nearer the node's float64 value (worst "
                    f"{worst_node:.1g}" + (f", where rounding noise moves onnxruntime's by {moved:.1g})" if moved else ")"))


def kernel_count(manifest: dict, kernel_class: str) -> int:
    for p in manifest.get("programs", []):
        if p.get("class") == kernel_class:
            return len(p["steps"])
    return len(manifest["programs"][0]["steps"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--target", default="portable")
    ap.add_argument("--cache", type=Path, default=None)
    args = ap.parse_args(argv)
    row = run_model(args.model, args.target, args.cache or default_cache())
    print(MARK + json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
