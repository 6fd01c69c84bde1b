"""One ONNX node-test case: loading it, comparing its outputs, and the placement rule.

The rules themselves are documented in ``run.py``'s docstring (onnxruntime's backend-test comparison; data on
the GPU, only shape arithmetic on the host). The sweep (``run.py``) and the browser conformance site
(``tests/browser/conformance_site.py``) both judge cases with these functions.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx

from webinfer.opschema import HOST_MAX_ELEMENTS

from .categories import NODE_DIR

RTOL, ATOL = 1e-3, 1e-5


class CaseError(Exception):
    """A case-level failure with a ready-made reason."""


# -- loading a case ----------------------------------------------------------------------------------
def _load_value(path: Path, tp: onnx.TypeProto):
    """A tensor as a numpy array, a sequence as a list of them, an optional as None or its value."""
    kind = tp.WhichOneof("value")
    proto = {"tensor_type": onnx.TensorProto, "sequence_type": onnx.SequenceProto,
             "optional_type": onnx.OptionalProto}.get(kind)
    if proto is None:
        raise CaseError(f"{kind.replace('_type', '')} input/output not supported")
    t = proto()
    t.ParseFromString(path.read_bytes())
    if kind == "sequence_type":
        return onnx.numpy_helper.to_list(t)
    if kind == "optional_type":
        return onnx.numpy_helper.to_optional(t)
    return onnx.numpy_helper.to_array(t)


def load_case(case_dir: Path):
    """(model, [(feeds dict, expected outputs list), ...])."""
    model = onnx.load(str(case_dir / "model.onnx"))
    inits = {i.name for i in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in inits]
    sets = []
    for ds in sorted(case_dir.glob("test_data_set_*")):
        n_in = len(list(ds.glob("input_*.pb")))
        n_out = len(list(ds.glob("output_*.pb")))
        feeds = {graph_inputs[i].name: _load_value(ds / f"input_{i}.pb", graph_inputs[i].type)
                 for i in range(n_in)}
        outs = [_load_value(ds / f"output_{i}.pb", model.graph.output[i].type) for i in range(n_out)]
        sets.append((feeds, outs))
    return model, sets


# -- checks ------------------------------------------------------------------------------------------
def compare(expected: list, got: list) -> str | None:
    """onnxruntime's backend-test rule; returns a reason or None. A sequence output is a list (compared
    element by element), an empty optional None."""
    if len(got) != len(expected):
        return f"{len(got)} outputs, expected {len(expected)}"
    for i, (r, g) in enumerate(zip(expected, got)):
        if r is None or g is None or isinstance(r, list) or isinstance(g, list):
            if (r is None) != (g is None) or isinstance(r, list) != isinstance(g, list):
                return f"output {i}: {type(g).__name__}, expected {type(r).__name__}"
            why = compare(r, g) if isinstance(r, list) else None
            if why:
                return f"output {i} (a sequence): {why}"
            continue
        r, g = np.asarray(r), np.asarray(g)
        if g.dtype != r.dtype:
            return f"dtype of output {i}: {g.dtype}, expected {r.dtype}"
        if g.shape != r.shape:
            return f"shape of output {i}: {g.shape}, expected {r.shape}"
        if r.dtype.kind in "fc" or _ml_float(r.dtype):
            rf, gf = r.astype(np.float64), g.astype(np.float64)
            nan_r, nan_g = np.isnan(rf), np.isnan(gf)
            if (nan_r != nan_g).any():
                return f"mismatch in output {i}: NaN positions differ"
            ok = ~nan_r
            inf = np.isinf(rf) & ok
            if (rf[inf] != gf[inf]).any():
                return f"mismatch in output {i}: infinities differ"
            fin = ok & ~inf
            err = np.abs(gf[fin] - rf[fin])
            bad = err > ATOL + RTOL * np.abs(rf[fin])
            if bad.any():
                return (f"mismatch in output {i}: max abs err {err.max():.3g} "
                        f"({int(bad.sum())} of {r.size} elements out of tolerance)")
        elif not np.array_equal(g, r):
            return f"mismatch in output {i}: {int((g != r).sum())} of {r.size} elements differ"
    return None


def _ml_float(dtype: np.dtype) -> bool:
    """ml_dtypes' float types (bfloat16, float8*, float4*) have numpy kind 'V'; they compare as floats (NaNs
    equal, like onnx's own runner, whose assert_allclose sees them as floats)."""
    return dtype.kind == "V" and "float" in dtype.name


def _dtypes_of(model: onnx.ModelProto) -> dict[str, int]:
    try:
        model = onnx.shape_inference.infer_shapes(model)
    except Exception:
        pass
    g = model.graph
    out = {t.name: t.data_type for t in g.initializer}
    for v in list(g.input) + list(g.output) + list(g.value_info):
        if v.type.WhichOneof("value") == "tensor_type":
            out[v.name] = v.type.tensor_type.elem_type
    return out


_INTEGER = {onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64,
            onnx.TensorProto.UINT8, onnx.TensorProto.UINT16, onnx.TensorProto.UINT32, onnx.TensorProto.UINT64,
            onnx.TensorProto.BOOL}


_SHAPE_ONLY_OPS = {"Shape", "Size", "EyeLike"}  # read only their input's shape and dtype, never its values


def check_placement(model: onnx.ModelProto, placement: list[dict]) -> str | None:
    """Data derived from graph input values must not be computed on the host (see the module docstring).

    A value is *live* when it is a graph input or is computed from a live value over a data edge. Edges
    that carry no data: inputs of Shape/Size/EyeLike, and integer inputs in shape-arithmetic positions
    (``opschema.host_inputs()``: Reshape's shape, Slice's starts, ...). A node with a live input on a data
    edge that ran as 'host'/'folded' fails when it produced a non-integer tensor or more than 64 elements.
    So a float mask built at build time from Shape(x) is fine; Range over float graph inputs is not.
    ``model`` must be the graph webinfer lowered (``lowered_graph``) so node indices line up."""
    from webinfer.opschema import host_inputs

    host_positions = host_inputs()

    ops = [n.op_type for n in model.graph.node]
    if [p["op"] for p in placement] != ops:
        return f"placement: runner cannot match {len(placement)} placement rows to {len(ops)} nodes"
    inits = {i.name for i in model.graph.initializer}
    live = {i.name for i in model.graph.input if i.name not in inits}
    dtypes = _dtypes_of(model)
    where = {p["node"]: p for p in placement}
    for index, node in enumerate(model.graph.node):
        if node.op_type in _SHAPE_ONLY_OPS:
            continue
        shape_pos = host_positions.get(node.op_type, ())
        if not any(name in live and (pos not in shape_pos or dtypes.get(name) not in _INTEGER)
                   for pos, name in enumerate(node.input) if name):
            continue
        live.update(o for o in node.output if o)
        p = where.get(index)
        if p is None or p["where"] not in ("host", "folded"):
            continue
        counts = p.get("elements", [])
        for k, name in enumerate(o for o in node.output if o):
            dt = dtypes.get(name)
            n = counts[k] if k < len(counts) else None
            try:
                n = int(n)
            except (TypeError, ValueError):
                n = None
            if dt is not None and dt not in _INTEGER:
                return (f"placement: {node.op_type} ran as {p['where']} on graph inputs "
                        f"({onnx.helper.tensor_dtype_to_np_dtype(dt).name} output)")
            if n is not None and n > HOST_MAX_ELEMENTS:
                return f"placement: {node.op_type} ran as {p['where']} on graph inputs ({n} elements)"
    return None


def lowered_graph(model: onnx.ModelProto) -> onnx.ModelProto:
    """The graph webinfer's build lowers (import, opset upgrade, graph passes): placement indexes it."""
    import onnx_ir as ir

    from webinfer.build import imported

    m = imported(model)
    try:
        from webinfer.graph.optimize import optimize
    except ImportError:  # before the graph passes existed
        return ir.serde.serialize_model(m)
    optimize(m)
    return ir.serde.serialize_model(m)


_NODE_RE = re.compile(r" \(node [^)]*\)")


def short_reason(e: BaseException) -> str:
    """First line of the error, without node names, so reasons are stable and groupable."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if isinstance(e, CaseError):
        return text[:200]
    from webinfer.errors import WebinferError

    text = _NODE_RE.sub("", text)
    if not isinstance(e, WebinferError):
        text = f"{type(e).__name__}: {text}"
    return text.replace("\t", " ")[:200]


def run_case(case: str, target: str = "software") -> tuple[str, str]:
    """(status, reason) of one case, in this process, built for kernel class ``target``."""
    from webinfer.backend import WebinferRep

    try:
        model, sets = load_case(NODE_DIR / case)
        rep = WebinferRep(model, target=target)
        for feeds, expected in sets:
            got = rep.run(feeds)
            why = compare(expected, got)
            if why:
                return "fail", why
        why = check_placement(lowered_graph(model), rep.placement)
        if why:
            return "fail", why
        return "pass", ""
    except Exception as e:  # noqa: BLE001 - every failure is a result
        return "fail", short_reason(e)
