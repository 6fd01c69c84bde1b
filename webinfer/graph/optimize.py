"""optimize(model): run the graph passes in place on an onnx-ir model, one report row per pass."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import onnx_ir as ir

from ..errors import WebinferError
from .passes import CLEANUP, PASSES


def optimize(model: ir.Model, passes: Sequence[str] | None = None,
             rewrites: dict[str, Callable] | None = None) -> list[dict]:
    """Apply ``passes`` (names from ``passes.PASSES``, all of them in order by default) to ``model``.

    ``rewrites`` (name -> fn(model)) are extra passes the build asks for, such as the LLM's in-place
    KV cache; they run after the clean-up passes and before the fusions.
    Returns ``[{"name", "nodes_before", "nodes_after", "seconds"}, ...]`` for the manifest.
    """
    names = list(PASSES) if passes is None else list(passes)
    unknown = [n for n in names if n not in PASSES]
    if unknown:
        raise WebinferError(f"unknown graph pass(es) {unknown}; known: {sorted(PASSES)}")
    table = dict(PASSES)
    if rewrites:
        cut = next((i for i, n in enumerate(names) if n not in CLEANUP), len(names))
        names[cut:cut] = list(rewrites)
        table.update(rewrites)
    report = []
    for name in names:
        before = model.graph.num_nodes()
        t0 = time.perf_counter()
        table[name](model)
        report.append({"name": name, "nodes_before": before, "nodes_after": model.graph.num_nodes(),
                       "seconds": round(time.perf_counter() - t0, 4)})
    return report
