"""The build report: ONNX nodes in, dispatches per run, planned vs naive activation memory, weights, passes.

Symbolic dims are evaluated at the values given with ``--dim name=value`` (a bounded dim at its bound, others
at 1 when not given, and said so).
The planned figure comes from the same planner the runtime uses (``runtime/memory.py``).
"""

from __future__ import annotations

from . import dims as D
from .dtypes import gpu_nbytes
from .format.manifest import parse_manifest
from .format.schema import Manifest, to_json
from .format.steps import step_runs
from .runtime.control_flow import host_reads, loop_ranges
from .runtime.memory import lifetimes, plan_slots

_VIEW_KEYS = ("steps", "outputs", "placement", "control", "guards", "branch_guards", "program", "program_index")


def _numel(shape, env) -> int:
    n = 1
    for d in shape:
        n *= D.evaluate(d, env)
    return n


def build_report(manifest: Manifest | dict, dim_values: dict | None = None, program: int = 0) -> dict:
    """The report of one program of the artifact (default: its first, most preferred one). ``manifest``: the
    typed manifest (``Artifact.spec``), or its JSON object, or one program's view of that
    (artifact.program_view), parsed here."""
    if isinstance(manifest, Manifest):
        spec = manifest
    else:
        if "program_index" in manifest:  # a program's view: the artifact's manifest with that program on top
            program = manifest["program_index"]
            manifest = {k: v for k, v in manifest.items() if k not in _VIEW_KEYS}
        spec = parse_manifest(manifest, "the manifest")
    p = spec.programs[program]
    env = {name: int((dim_values or {}).get(name, 1)) for name in spec.dims}
    for name, bound in spec.bounds.items():  # loop counts, --dim lo..hi: sized at their bound
        if name not in (dim_values or {}):
            env[name] = int(bound)
    tensors = spec.tensors
    base = [spec.base(tid) for tid in range(len(tensors))]
    live = lifetimes(len(tensors), [s.reads + s.writes for s in p.steps], [io.tensor for io in spec.inputs],
                     [io.tensor for io in p.outputs], base, loop_ranges(p.control), host_reads(p.control))
    sizes = {tid: max(4, gpu_nbytes(t.dtype, _numel(t.shape, env))) for tid, t in enumerate(tensors)
             if t.kind in ("input", "temp") and t.alias is None and tid in live}  # this program's
    _, slot_sizes = plan_slots(sizes, live)
    return {
        # ONNX nodes in: before the graph passes when they ran.
        "nodes": spec.passes[0].nodes_before if spec.passes else len(p.placement),
        "kernels": sum(step_runs(s, env) for s in p.steps),
        "peak_bytes": sum(slot_sizes),
        "naive_bytes": sum(sizes.values()),
        "weight_bytes": sum(gpu_nbytes(tensors[tid].dtype, _numel(tensors[tid].shape, {})) for tid in p.weights),
        # KV-cache and other states: allocated once, at their capacity
        "state_bytes": sum(max(4, gpu_nbytes(tensors[st.tensor].dtype, _numel(tensors[st.tensor].capacity, {})))
                           for st in spec.states),
        "kernel_class": p.kernel_class,
        "shaders": p.shaders,
        "dims": env,
        "passes": to_json(spec.passes),  # (the report is written as JSON: build --report)
    }


def gpu_memory(report: dict) -> int:
    """What a session allocates in storage at these dims: the program's weights, its states at their capacity,
    and the planned activation slots (uniforms and readback buffers, a few KiB, aside)."""
    return report["weight_bytes"] + report["state_bytes"] + report["peak_bytes"]


def report_table(report: dict) -> str:
    rows = [("ONNX nodes", report["nodes"]), ("kernel class", report["kernel_class"]),
            ("kernels per run", report["kernels"]), ("distinct shaders", report["shaders"]),
            ("planned activation bytes", f"{report['peak_bytes']:,}"),
            ("naive activation bytes", f"{report['naive_bytes']:,}"),
            ("weight bytes", f"{report['weight_bytes']:,}"),
            ("state bytes (KV cache)", f"{report['state_bytes']:,}"),
            ("GPU memory at run", f"{gpu_memory(report):,} (weights + states + planned activations)"),
            ("dims", ", ".join(f"{k}={v}" for k, v in report["dims"].items()) or "static")]
    width = max(len(r[0]) for r in rows)
    lines = [f"{k.ljust(width)}  {v}" for k, v in rows]
    if report["passes"]:
        lines.append("")
        lines.append(f"{'pass'.ljust(24)}  nodes before  nodes after  seconds")
        for p in report["passes"]:
            lines.append(f"{p['name'][:24].ljust(24)}  {p['nodes_before']:>12}  {p['nodes_after']:>11}  "
                         f"{p['seconds']:.3f}")
    return "\n".join(lines)
