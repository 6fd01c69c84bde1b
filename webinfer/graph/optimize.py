"""optimize(model): run the graph passes in place on an onnx-ir model, one report row per pass."""

from __future__ import annotations

import time
from collections.abc import Sequence

import onnx_ir as ir

from ..errors import WebinferError
from .passes import PASSES


def optimize(model: ir.Model, passes: Sequence[str] | None = None) -> list[dict]:
    """Apply ``passes`` (names from ``passes.PASSES``, all of them in order by default) to ``model``.

    Returns ``[{"name", "nodes_before", "nodes_after", "seconds"}, ...]`` for the manifest.
    """
    names = list(PASSES) if passes is None else list(passes)
    unknown = [n for n in names if n not in PASSES]
    if unknown:
        raise WebinferError(f"unknown graph pass(es) {unknown}; known: {sorted(PASSES)}")
    report = []
    for name in names:
        before = model.graph.num_nodes()
        t0 = time.perf_counter()
        PASSES[name](model)
        report.append({"name": name, "nodes_before": before, "nodes_after": model.graph.num_nodes(),
                       "seconds": round(time.perf_counter() - t0, 4)})
    return report
