"""The roofline of a model on one device: how close a measured time is to what the device's own peaks allow.

A model's *work* at the bench's feeds: multiply-add FLOPs of its MatMul / Gemm / Conv nodes (2 per
multiply-add, shapes from onnxruntime's symbolic shape inference with the feeds' shapes) and the bytes it must move at least once
(weights, inputs, outputs). Its roofline time is ``max(flops / FMA peak, bytes / copy peak)`` with the peaks
``benchmarks/kernels.py`` measures on the same adapter in the same run; a cell's roofline share is that time
over the measured one (100 % = at the device's limit). Text generation rows are left out (their work depends on
the cache length per step).
"""

from __future__ import annotations

import numpy as np


def _dims(info) -> list[int] | None:
    dims = [d.dim_value if d.HasField("dim_value") else None for d in info.type.tensor_type.shape.dim]
    return dims if all(isinstance(d, int) and d > 0 for d in dims) or dims == [] else None


def _count(shapes: dict, node) -> int | None:
    """FLOPs of one node (0 for kinds that are not products), None when a needed shape is unknown."""
    if node.op_type not in ("MatMul", "Gemm", "Conv") or node.domain not in ("", "ai.onnx"):
        return 0
    out, a, b = shapes.get(node.output[0]), shapes.get(node.input[0]), shapes.get(node.input[1])
    if out is None or a is None or b is None:
        return None
    if node.op_type == "MatMul":
        k = a[-1]
    elif node.op_type == "Gemm":
        trans_a = next((at.i for at in node.attribute if at.name == "transA"), 0)
        k = a[0] if trans_a else a[-1]
    else:  # Conv: each output element sums C_in / group x kernel taps
        k = int(np.prod(b[1:]))
    return 2 * int(np.prod(out)) * k


def model_work(path: str, feeds: dict) -> dict | None:
    """{"flops", "bytes"} of one run of the model at ``feeds``, or None when a product's shape stays unknown."""
    import onnx

    model = onnx.load(path)
    for inp in model.graph.input:
        if inp.name in feeds:
            shape = inp.type.tensor_type.shape
            for d, n in zip(shape.dim, np.asarray(feeds[inp.name]).shape):
                d.Clear()
                d.dim_value = int(n)
    # onnxruntime's symbolic inference follows shapes computed in the graph (Shape -> Gather -> Concat ->
    # Reshape, as BERT exports write them), which onnx's own data propagation leaves unknown
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    inferred = SymbolicShapeInference.infer_shapes(model, auto_merge=True)
    g = inferred.graph
    shapes = {i.name: _dims(i) for i in list(g.input) + list(g.value_info) + list(g.output)}
    shapes.update({t.name: list(t.dims) for t in g.initializer})
    flops = 0
    for node in g.node:
        n = _count(shapes, node)
        if n is None:
            return None
        flops += n
    weights = sum(onnx.numpy_helper.to_array(t).nbytes for t in g.initializer)
    inputs = sum(np.asarray(v).nbytes for v in feeds.values())
    outputs = sum(4 * int(np.prod(shapes[o.name])) for o in g.output if shapes.get(o.name) is not None)
    return {"flops": flops, "bytes": weights + inputs + outputs}


def share(work: dict, ms: float, peak_gflops: float, peak_gbs: float) -> tuple[float, str]:
    """(roofline time / measured time, the bound: 'FMA' or 'copy')."""
    t_flops = work["flops"] / (peak_gflops * 1e9)
    t_bytes = work["bytes"] / (peak_gbs * 1e9)
    return max(t_flops, t_bytes) / (ms / 1e3), "FMA" if t_flops >= t_bytes else "copy"


def lines(rows: list[dict], names: dict) -> list[str]:
    """The report's roofline section: per native webinfer engine with kernel peaks, each model cell's share."""
    peaks = {}
    for r in rows:
        if r["model"] == "kernels" and r["metric"] in ("peak FMA", "peak copy") and r["median"]:
            peaks.setdefault(r["engine"], {})[r["metric"]] = r["median"]
    out = []
    for engine, p in peaks.items():
        if len(p) < 2:
            continue
        cells = []
        for r in rows:
            if r["engine"] != engine or not r.get("work") or r["unit"] != "ms" or r["error"] or not r["median"]:
                continue
            s, bound = share(r["work"], r["median"], p["peak FMA"], p["peak copy"])
            cells.append(f"{r['model']} {r['metric']}: {100 * s:.1f} % ({bound}-bound)")
        if cells:
            out.append(f"- {names.get(engine, engine)} (peaks {p['peak FMA']:.1f} GFLOP/s, {p['peak copy']:.2f} "
                       f"GB/s): " + "; ".join(cells))
    return out
