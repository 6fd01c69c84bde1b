"""TopK: one invocation per row selects the k best elements in order (``topk.wgsl.j2``), optionally of the row's
softmax (``webinfer.SoftmaxTopK``)."""

from __future__ import annotations

from ... import dims as D
from ..registry import WEBINFER_DOMAIN, lowering
from ._floats import helper_sources
from .helpers import compute_type, contiguous_strides, normalize_axis
from .loop_limit import check_loop
from .norm import _SOFTMAX
from .reduce import _HIGHEST, _LOWEST, LOOP_BUDGET, row_kernel, same

# one invocation ranks an element against the whole row up to this length; past it, chunks of CHUNK_MIN or more
RANK_MAX_N = LOOP_BUDGET
CHUNK_MIN = 4096


@lowering("TopK")
def lower_topk(ctx) -> None:
    k = ctx.host_ints(1) if ctx.opset >= 10 else [ctx.attr("k")]
    topk(ctx, k, normalize_axis(ctx.attr("axis", -1), ctx.inputs[0].rank), 0)


@lowering("SoftmaxTopK", domain=WEBINFER_DOMAIN)
def lower_softmax_topk(ctx) -> None:
    """Softmax over the last axis (output 0), then TopK of its result (outputs 1, 2): one kernel
    (graph/passes/fuse_softmax_topk.py)."""
    x = ctx.inputs[0]
    if x.dtype != "float32":
        raise ctx.unsupported(f"input type {x.dtype} (expected float32)")
    probs = ctx.output(0, x.dtype, x.shape)
    k, n = ctx.host_ints(1), x.shape[-1]
    if k and len(k) == 1 and not (isinstance(n, int) and (3 + k[0]) * n < LOOP_BUDGET):
        # one invocation would pass lavapipe's loop limit (ImageNet-21k's 21843 classes): Softmax's own row
        # kernel, then TopK ranks its result
        stats, expr = _SOFTMAX["Softmax"]
        row_kernel(ctx, x, [x.rank - 1], stats, elem_out=(probs, expr))
        return topk(ctx, k, x.rank - 1, 1, src=probs)
    topk(ctx, k, x.rank - 1, 1, probs)


def topk(ctx, k, axis: int, first: int, probs=None, src=None) -> None:
    """TopK of input 0 (or of ``src``) along ``axis`` into outputs ``first`` (values) and ``first + 1``
    (indices); with ``probs``, of the softmax of input 0 along ``axis``, written there first."""
    x = ctx.inputs[0] if src is None else src
    if k is None or len(k) != 1:
        raise ctx.unsupported("k must be known at build time")
    k = k[0]
    t = compute_type(x.dtype)
    if t == "bool":
        raise ctx.unsupported("bool input")
    shape = tuple(k if a == axis else d for a, d in enumerate(x.shape))
    values = ctx.output(first, x.dtype, shape)
    indices = ctx.output(first + 1, "int64", shape)
    xs, os_ = contiguous_strides(x.shape), contiguous_strides(shape)
    params: dict = {"K": k, "n": x.shape[axis], "xs": xs[axis], "os": os_[axis]}
    kept = [a for a in range(x.rank) if a != axis]
    for i, a in enumerate(kept):
        params[f"k{i}"], params[f"ks{i}"], params[f"os{i}"] = x.shape[a], xs[a], os_[a]
    rows = D.product([x.shape[a] for a in kept])
    params["rows"] = rows
    largest = bool(ctx.attr("largest", 1))
    less = (lambda a, b: f"less_nan({a}, {b})") if t == "f32" else (lambda a, b: f"({a} < {b})")
    # "a comes after b" in the output order: smaller first when largest, larger first otherwise
    ranked_after = (lambda a, b: less(a, b)) if largest else (lambda a, b: less(b, a))
    helpers = helper_sources("less_nan( same_nan(") if t == "f32" else []
    n = x.shape[axis]
    if probs is None and not (isinstance(n, int) and k * n < LOOP_BUDGET):  # lavapipe's loop limit: rank instead
        if isinstance(n, int) and n >= RANK_MAX_N:
            return _topk_chunks(ctx, x, values, indices, params, len(kept), helpers,
                                before=ranked_after("v", "u"), tie=same(t, "u", "v"))
        params["total"] = D.mul(rows, n)
        ctx.dispatch("topk_rank.wgsl.j2", {"x": ctx.gpu(x)}, {"values": values, "indices": indices},
                     work=params["total"], params=params, wg=64, rank=len(kept), helpers=helpers,
                     before=ranked_after("v", "u"), tie=same(t, "u", "v"))
        return
    writes = {"probs": probs} if probs is not None else {}
    ctx.dispatch("topk.wgsl.j2", {"x": ctx.gpu(x)}, {**writes, "values": values, "indices": indices}, work=rows,
                 params=params, wg=64, rank=len(kept), t=t, worst=(_LOWEST if largest else _HIGHEST)[t],
                 after=ranked_after("v", "pv"), tie=same(t, "v", "pv"), better=ranked_after("bv", "v"),
                 helpers=helpers, softmax=probs is not None, lowest=_LOWEST[t])


def _topk_chunks(ctx, x, values, indices, params, rank, helpers, **order) -> None:
    """Ranking over n >= 65535 elements passes lavapipe's loop limit: the best k of each chunk of C elements
    first (an invocation per element, C iterations), then a ranking of those candidates (M = chunks x k)."""
    k, n = params["K"], params["n"]
    c = max(CHUNK_MIN, k, -(-n * k // (LOOP_BUDGET - 1)))
    m = -(-n // c) * k
    check_loop(ctx, max(c, m), "the axis length (each element ranked against its chunk or the candidates)")
    rows = params["rows"]
    cv, ci = ctx.temp(x.dtype, (D.mul(rows, m),)), ctx.temp("int32", (D.mul(rows, m),))
    params = {**params, "C": c, "M": m}
    ctx.dispatch("topk_chunks.wgsl.j2", {"x": ctx.gpu(x)}, {"cv": cv, "ci": ci}, work=D.mul(rows, n), params=params,
                 wg=64, rank=rank, helpers=helpers, phase="chunk", **order)
    ctx.dispatch("topk_chunks.wgsl.j2", {"cv": cv, "ci": ci}, {"values": values, "indices": indices},
                 work=D.mul(rows, m), params=params, wg=64, rank=rank, helpers=helpers, phase="merge", **order)
