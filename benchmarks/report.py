"""bench.json, bench.md and bench.png from the harness's rows.

The table is models x engines; every cell is a median with its spread, or the reason it has no time.
Speed-up lines compare webinfer with the peer on the same GPU, as the issue's targets are stated.
"""

from __future__ import annotations

import json
import os

from .roofline import lines as roofline_lines

# (webinfer engine, peer engine, what the pair shares): the comparisons the targets are about.
PAIRS = [("webinfer-swiftshader", "ort-webgpu", "native, both on SwiftShader's Vulkan driver"),
         ("webinfer-pyodide", "ort-web-webgpu", "same Chromium, Dawn on SwiftShader"),
         ("webinfer-pyodide", "ort-web-wasm", "same Chromium, onnxruntime-web on the CPU (wasm threads)"),
         ("webinfer-cpu", "ort-web-wasm", "same Chromium, webinfer's CPU path (the artifact's CPU model on onnxruntime-web wasm)"),
         ("webinfer", "ort-cpu", "webinfer on the default adapter vs onnxruntime CPU"),
         ("webinfer", "ort-cuda", "webinfer on the default adapter vs onnxruntime CUDA"),
         ("webinfer", "webinfer-software", "the adapter's class vs the software class, same adapter")]


def short_adapter(adapter: str) -> str:
    a = adapter or ""
    for key, label in (("llvmpipe", "lavapipe"), ("SwiftShader", "SwiftShader"), ("swiftshader", "SwiftShader")):
        if key in a:
            return label
    return a.split(" (")[0][:28]


def column_label(engine: str, rows: list[dict], names: dict) -> str:
    adapters = {r["adapter"] for r in rows if r["engine"] == engine and r["adapter"]}
    label = names.get(engine, engine)
    shown = sorted({short_adapter(a) for a in adapters} - {"CPU", ""})
    return f"{label} [{', '.join(shown)}]" if shown else label


def fmt_value(v: float) -> str:
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def cell(row: dict | None) -> str:
    if row is None:
        return "not run"
    if row["error"]:
        return row["error"].replace("|", "/")
    text = f"{fmt_value(row['median'])} {row['unit']}"
    if row.get("samples", 2) > 1:
        text += f" ({fmt_value(row['min'])}-{fmt_value(row['max'])})"
    return text + (f", {row['note']}" if row.get("note") else "")


def speedup(ours: dict | None, peer: dict | None) -> float | None:
    """> 1 when webinfer is faster (time: peer/ours; throughput: ours/peer)."""
    if not ours or not peer or ours["error"] or peer["error"] or not ours["median"] or not peer["median"]:
        return None
    return peer["median"] / ours["median"] if ours["unit"] == "ms" else ours["median"] / peer["median"]


def markdown(rows: list[dict], wall_s: float, names: dict) -> str:
    model_rows = [r for r in rows if r["model"] != "kernels" and not r["model"].startswith("kernel")]
    engines = list(dict.fromkeys(r["engine"] for r in model_rows))
    keys = list(dict.fromkeys((r["model"], r["metric"]) for r in model_rows))
    at = {(r["engine"], r["model"], r["metric"]): r for r in model_rows}
    head = ["model", "metric"] + [column_label(e, model_rows, names) for e in engines]
    lines = [f"# webinfer bench ({wall_s:.0f} s wall)", "",
             "Median (min-max) after warm-up; a cell without a time says why. Outputs checked against "
             "onnxruntime CPU first. First result: making the engine (session, weights) plus its first run; "
             "in the browser a fresh page in a fresh context, so the runtime's start (Pyodide, "
             "onnxruntime-web's wasm) counts; natively in a running worker, imports aside.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for model, metric in keys:
        lines.append("| " + " | ".join([model, metric] + [cell(at.get((e, model, metric))) for e in engines]) + " |")
    lines += ["", "## webinfer vs peer (>1: webinfer faster)", ""]
    for ours, peer, what in PAIRS:
        if ours not in engines or peer not in engines:
            continue
        parts = []
        for model, metric in keys:
            s = speedup(at.get((ours, model, metric)), at.get((peer, model, metric)))
            parts.append(f"{model} {metric}: {'-' if s is None else f'{s:.2f}x'}")
        lines.append(f"- {names.get(ours, ours)} vs {names.get(peer, peer)} ({what}): " + "; ".join(parts))
    baselines = [(e.split("@")[0], e) for e in engines if "@" in e and e.split("@")[0] in engines]
    if baselines:
        lines += ["", "## webinfer vs a baseline revision of itself, same run (>1: this checkout faster)", ""]
    for ours, base in baselines:
        parts = []
        for model, metric in keys:
            s = speedup(at.get((ours, model, metric)), at.get((base, model, metric)))
            parts.append(f"{model} {metric}: {'-' if s is None else f'{s:.2f}x'}")
        lines.append(f"- {ours} vs {base}: " + "; ".join(parts))
    roof = roofline_lines(rows, names)
    if roof:
        lines += ["", "## Roofline (webinfer natively: the model's FLOPs and bytes at the peaks measured on the "
                  "same adapter; 100 % = the device's limit)", ""] + roof
    kernel = [r for r in rows if r["model"].startswith("kernel")]
    if kernel:
        lines += ["", "## Kernels (webinfer natively; % of the peak measured on the same adapter)", ""]
        k_engines = list(dict.fromkeys(r["engine"] for r in kernel))
        k_at = {(r["engine"], r["metric"]): r for r in kernel}
        lines += ["| kernel | " + " | ".join(column_label(e, kernel, names) for e in k_engines) + " |",
                  "|" + "---|" * (len(k_engines) + 1)]
        for metric in dict.fromkeys(r["metric"] for r in kernel):
            lines.append(f"| {metric} | " + " | ".join(cell(k_at.get((e, metric))) for e in k_engines) + " |")
    return "\n".join(lines) + "\n"


def chart(rows: list[dict], path: str, names: dict) -> None:
    """One panel per model metric, a bar per engine (log scale); cells without a time are marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model_rows = [r for r in rows if not r["model"].startswith("kernel")]
    keys = list(dict.fromkeys((r["model"], r["metric"], r["unit"]) for r in model_rows))
    engines = list(dict.fromkeys(r["engine"] for r in model_rows))
    at = {(r["engine"], r["model"], r["metric"]): r for r in model_rows}
    fig, axes = plt.subplots(len(keys) or 1, 1, figsize=(9, 1.0 + 0.32 * len(engines) * max(1, len(keys))),
                             squeeze=False)
    for ax, (model, metric, unit) in zip(axes[:, 0], keys):
        vals = [at.get((e, model, metric)) for e in engines]
        heights = [r["median"] if r and not r["error"] and r["median"] else 0 for r in vals]
        ax.barh(range(len(engines)), heights, color="#4a7ab8")
        for i, h in enumerate(heights):
            ax.text(h if h else 0, i, f" {fmt_value(h)}" if h else " no time", va="center", fontsize=7)
        ax.set_yticks(range(len(engines)), [names.get(e, e) + (" *" if e.startswith("webinfer") else "")
                                            for e in engines], fontsize=7)
        ax.invert_yaxis()
        if any(heights):
            ax.set_xscale("log")
        ax.set_title(f"{model}: {metric} ({unit}, {'lower' if unit == 'ms' else 'higher'} is better)", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_all(rows: list[dict], out_dir: str, wall_s: float, names: dict) -> str:
    with open(os.path.join(out_dir, "bench.json"), "w") as f:
        json.dump(rows, f, indent=1)
    text = markdown(rows, wall_s, names)
    with open(os.path.join(out_dir, "bench.md"), "w") as f:
        f.write(text)
    chart(rows, os.path.join(out_dir, "bench.png"), names)
    return text
