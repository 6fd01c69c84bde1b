"""TopK: the k best elements of a row in order, optionally of the row's softmax (``webinfer.SoftmaxTopK``): one
invocation per short row (``topk.wgsl.j2``), a workgroup per long row (``topk_wg.wgsl.j2``), or, past what even
that loops through, each element ranking itself (``topk_rank.wgsl.j2``; over 65,535 elements, within chunks and
then among the chunks' best, ``topk_chunks.wgsl.j2``)."""

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
    if k and len(k) == 1 and not (isinstance(n, int) and _wg_steps(k[0] if isinstance(k[0], int) else n, n, True)
                                  <= WG_LOOP_MAX):
        # even a workgroup per row would pass lavapipe's loop limit: Softmax's own row kernel, then TopK of its
        # result
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
    # a k known only at run time (PicoDet's min(boxes kept, keep_top_k)) is at most n: the loop counts take n
    kb = k if isinstance(k, int) else n
    # one invocation per row while it loops little; a workgroup per row while its invocations do; else each
    # element ranks itself (n steps an invocation; a symbolic n too): lavapipe's loop limit, docs/notes.md
    if probs is None and not (isinstance(n, int) and ((kb + 3) * n <= LOOP_MAX or _wg_steps(kb, n) <= WG_LOOP_MAX)):
        if isinstance(n, int) and n >= RANK_MAX_N:
            if not isinstance(k, int):
                raise ctx.unsupported(f"k known only at run time over an axis of {n} (65,535 or more)")
            return _topk_chunks(ctx, x, values, indices, params, len(kept), helpers,
                                before=ranked_after("v", "u"), tie=same(t, "u", "v"))
        params["total"] = D.mul(rows, n)
        ctx.dispatch("topk_rank.wgsl.j2", {"x": ctx.gpu(x)}, {"values": values, "indices": indices},
                     work=params["total"], params=params, wg=64, rank=len(kept), helpers=helpers,
                     before=ranked_after("v", "u"), tie=same(t, "u", "v"))
        return
    writes = {"probs": probs} if probs is not None else {}
    common = dict(params=params, rank=len(kept), t=t, worst=(_LOWEST if largest else _HIGHEST)[t],
                  after=ranked_after("v", "pv"), tie=same(t, "v", "pv"), better=ranked_after("bv", "v"),
                  helpers=helpers, softmax=probs is not None, lowest=_LOWEST[t])
    outs = {**writes, "values": values, "indices": indices}
    if isinstance(n, int) and (kb + 3) * n <= LOOP_MAX:
        ctx.dispatch("topk.wgsl.j2", {"x": ctx.gpu(x)}, outs, work=rows, wg=64, **common)
        return
    ctx.dispatch("topk_wg.wgsl.j2", {"x": ctx.gpu(x)}, outs, work=D.mul(rows, WG), wg=WG, WG=WG,
                 merge_better=ranked_after("cv", "ov"), merge_tie=same(t, "ov", "cv"), **common)


LOOP_MAX = 8192  # selection steps one invocation may loop through (llvmpipe's loop limiter: some 30,000 in all)
WG = 256  # invocations sharing a long row
WG_LOOP_MAX = 8192  # the same limit for one invocation of the workgroup kernel (past it: the ranking kernel)


def _wg_steps(k: int, n: int, softmax: bool = False) -> int:
    """Loop steps of one invocation of topk_wg.wgsl.j2: k selections (3 softmax passes) over its share of the
    row, and k merges of log2(WG) levels."""
    return (k + 3 * softmax) * -(-n // WG) + k * (WG.bit_length() - 1)


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
