"""Reductions: one row-wise kernel (``reduce.wgsl.j2``), and the Reduce* op table is data.

A reduction reads its input as rows x R (kept axes x reduced axes, adjacent axes merged) and computes a
list of statistics per row (:class:`Stat`: init, combine, per-element map, finalize). Softmax and the
normalizations (``norm.py``) reuse the same kernel with an extra per-element output.
"""

from __future__ import annotations

from dataclasses import dataclass

from ... import dims as D
from ...opschema import reduce_ops
from ..emit import wgsl_literal
from ..registry import lowering
from ._floats import helper_sources
from .helpers import compute_type, contiguous_strides, normalize_axis
from .long_scan import chunked_scan, row_bound

NEG_INF, POS_INF = "bitcast<f32>(0xff800000u)", "bitcast<f32>(0x7f800000u)"
_LOWEST = {"f32": NEG_INF, "i32": "i32(-2147483647i - 1i)", "u32": "0u"}
_HIGHEST = {"f32": POS_INF, "i32": "2147483647i", "u32": "4294967295u"}
# Workgroup-per-row pays only for very few, long rows on lavapipe, where a workgroup with barriers costs
# ~15 us. End-to-end runs (2 shared cores, noisy), loop vs wg in ms: ReduceSum 1x32000 1.07/0.81,
# 64x576 0.59/1.18, 512x576 2.2/9.3, 4096x64 1.9/51, 16x2048 1.06/2.02; Softmax 32x32000 17/63,
# 1x2048 0.77/0.63. Real GPUs want wg far sooner: pass ``mode`` (a template parameter) per adapter.
WG_MIN_ROW = 4096
WG_MAX_ROWS = 2
WG_SIZE = 128
LOOP_MAX_ROW = 8192  # longest row one invocation loops over (software GPUs; llvmpipe's loop limiter)
# Real GPUs (onnxruntime's Softmax/LayerNorm, llama.cpp's row_norm, TVM): one workgroup per row from short
# rows on, 64 invocations (256 for a single row), statistics reduced in workgroup memory or by subgroups.
GPU_WG_MIN_ROW = 32
GPU_WG_SIZE, GPU_WG_SIZE_ONE_ROW = 64, 256
# llvmpipe (lavapipe) breaks out of every loop of an invocation once they ran 65535 iterations together, silently
# (docs/notes.md): a row whose loops would pass that in one invocation is spread over a workgroup instead.
LOOP_BUDGET = 65535
_SUBGROUP_OPS = {"{a} + {b}": "subgroupAdd", "max({a}, {b})": "subgroupMax", "min({a}, {b})": "subgroupMin",
                 "{a} * {b}": "subgroupMul"}


@dataclass
class Stat:
    """One per-row statistic: ``combine`` formats {a} (accumulator) and {b}; ``map`` is the contribution of
    element ``v`` (may use earlier stats); ``final`` formats {a} (may use n_R, the row length)."""

    type: str
    init: str
    combine: str
    map: str = "v"
    final: str = "{a}"

    @property
    def subgroup(self) -> str | None:
        """The subgroup built-in computing ``combine`` across a subgroup, if there is one."""
        return _SUBGROUP_OPS.get(self.combine)


def sum_stat(t: str, m: str = "v", final: str = "{a}") -> Stat:
    return Stat(t, f"{t}(0)", "{a} + {b}", m, final)


def max_stat(t: str, m: str = "v", nan: bool = False) -> Stat:
    """``nan``: a NaN element makes the maximum NaN (ReduceMax, ArgMax); Softmax does not need it (a NaN
    reaches its sum anyway) and keeps the subgroup built-in."""
    return Stat(t, _LOWEST[t], "max_nan({a}, {b})" if nan and t == "f32" else "max({a}, {b})", m)


def min_stat(t: str, m: str = "v", nan: bool = False) -> Stat:
    return Stat(t, _HIGHEST[t], "min_nan({a}, {b})" if nan and t == "f32" else "min({a}, {b})", m)


def same(t: str, a: str, b: str) -> str:
    """WGSL: ``a`` equals ``b``, a NaN matching a NaN (the index of a NaN maximum)."""
    return f"same_nan({a}, {b})" if t == "f32" else f"{a} == {b}"


def split_axes(shape, axes) -> tuple[list, list]:
    """(kept groups, reduced groups) as [(size, stride)], adjacent axes of one kind merged, 1s dropped."""
    strides = contiguous_strides(shape)
    kept: list = []
    red: list = []
    last = None
    for a, (d, s) in enumerate(zip(shape, strides)):
        if d == 1:
            continue
        kind = a in axes
        groups = red if kind else kept
        if last == kind and groups:
            groups[-1] = (D.mul(groups[-1][0], d), s)
        else:
            groups.append((d, s))
        last = kind
    return kept, red or [(1, 0)]


def choose_mode(rows, n, kclass) -> str:
    """Loop per row unless rows are long and few enough that a workgroup per row pays for its barriers
    (software GPUs), or unless rows are short (GPU class: a workgroup per row otherwise)."""
    if kclass.workgroup_memory:
        return "loop" if isinstance(n, int) and n < GPU_WG_MIN_ROW else "wg"
    # (a row of symbolic length too: lavapipe ends any loop after 65535 iterations, so one invocation cannot sum a
    # 30-second waveform; docs/notes.md). Nor can it walk a row of LOOP_MAX_ROW, whatever the rows: a softmax
    # makes three passes, and llvmpipe's loop limiter already cut 3 x 40,000 (ReduceSum 70,000) short.
    if not isinstance(n, int) or n >= LOOP_MAX_ROW:
        return "wg"
    if isinstance(rows, int) and rows <= WG_MAX_ROWS and n >= WG_MIN_ROW:
        return "wg"
    return "loop"


def row_kernel(ctx, x, axes, stats: list[Stat], row_outs=(), elem_out=None, reads=None, named=None,
               helpers=(), scan=None, mode: str | None = None, shape=None, when=None, elem_lets=()) -> None:
    """Emit the row-wise kernel over ``x`` (read as ``shape`` if given) reducing ``axes``. ``row_outs``:
    [(var, tensor, expr)]; ``elem_out``: (tensor, expr), after the WGSL lines ``elem_lets`` per element (an
    epilogue's loads and steps; ``o`` is the element's offset); ``reads``: extra inputs; ``named``: n_<name>;
    ``when``: the step's run condition (ctx.dispatch)."""
    kept, red = split_axes(x.shape if shape is None else shape, set(axes))
    rows = D.product([k for k, _ in kept])
    n = D.product([r for r, _ in red])
    mode = mode or ("loop" if scan else choose_mode(rows, n, ctx.kclass))
    loops = len(stats) + (elem_out is not None or scan is not None)  # loops over the row per invocation
    if mode == "loop" and not scan and isinstance(n, int) and loops * n >= LOOP_BUDGET:
        mode = "wg"
    params: dict = {"rows": rows, "R": n, "n_R": n}
    for i, (size, stride) in enumerate(kept):
        params[f"k{i}"], params[f"ks{i}"] = size, stride
    for i, (size, stride) in enumerate(red):
        params[f"r{i}"], params[f"rs{i}"] = size, stride
    for name, val in (named or {}).items():
        params[f"n_{name}"] = val
    writes = {var: t for var, t, _ in row_outs}
    if elem_out is not None or scan is not None:
        writes["out"] = elem_out[0] if elem_out is not None else scan["out"]
    all_reads = {"x": ctx.gpu(x), **{k: ctx.gpu(t) for k, t in (reads or {}).items()}}
    names = ["R", *(named or {})]
    text = " ".join([st.combine + st.map + st.final for st in stats] + [e for _, _, e in row_outs]
                    + [elem_out[1] if elem_out else "", *elem_lets])
    helpers = list(helpers) + [h for h in helper_sources(text) if h not in helpers]
    tctx = dict(stats=stats, kept=kept, reduced=red, mode=mode, named=names, helpers=helpers,
                row_outs=[(v, e) for v, _, e in row_outs], elem_out=elem_out[1] if elem_out else None,
                elem_lets=list(elem_lets),
                scan=scan, subgroups=ctx.kclass.use_subgroups)
    if mode == "wg":
        grid = (D.dmin(rows, 65535), D.ceildiv(rows, 65535), 1)
        wg = WG_SIZE
        if ctx.kclass.workgroup_memory:
            wg = GPU_WG_SIZE_ONE_ROW if rows == 1 else GPU_WG_SIZE
        if isinstance(n, int) and loops * -(-n // wg) >= LOOP_BUDGET:
            wg = GPU_WG_SIZE_ONE_ROW  # WebGPU's default limit of invocations; past it a row must be split
        ctx.dispatch("reduce.wgsl.j2", all_reads, writes, grid=grid, params=params, wg=wg, when=when, **tctx)
    else:
        ctx.dispatch("reduce.wgsl.j2", all_reads, writes, work=rows, params=params, wg=64, when=when, **tctx)


# --- Reduce* ----------------------------------------------------------------------------------------

def _reduce_stats(op: str, t: str) -> list[Stat]:
    """op -> statistics; ``t`` is the accumulator type (f32 for floats, the integer type otherwise)."""
    table = {
        "ReduceSum": lambda: [sum_stat(t)],
        "ReduceMean": lambda: [sum_stat(t, final=f"{{a}} / {t}(n_R)")],
        "ReduceMax": lambda: [max_stat(t, nan=True)],
        "ReduceMin": lambda: [min_stat(t, nan=True)],
        "ReduceProd": lambda: [Stat(t, f"{t}(1)", "{a} * {b}")],
        "ReduceL1": lambda: [sum_stat(t, "abs(v)" if t != "u32" else "v")],
        "ReduceL2": lambda: [sum_stat("f32", "f32(v) * f32(v)", "sqrt({a})")],
        "ReduceSumSquare": lambda: [sum_stat(t, "v * v")],
        "ReduceLogSum": lambda: [sum_stat("f32", "f32(v)", "log({a})")],
        "ReduceLogSumExp": lambda: [max_stat("f32", "f32(v)", nan=True),
                                    sum_stat("f32", "exp(f32(v) - s0)", "select(s0 + log({a}), s0, abs(s0) > 3.0e38)")],
    }
    return table[op]()


def reduce_axes(ctx) -> list[int] | None:
    """The axes to reduce (normalized), or None for a no-op; from the attribute or the ``axes`` input."""
    rank = ctx.inputs[0].rank
    axes_from_input = ctx.op == "ReduceSum" and ctx.opset >= 13 or ctx.opset >= 18
    if axes_from_input:
        axes = ctx.host_ints(1) if ctx.has_input(1) else []
        if axes is None:
            raise ctx.unsupported("axes must be known at build time")
        if not D.is_static(axes):
            raise ctx.unsupported("axes must be static integers")
    else:
        axes = ctx.attr("axes", [])
    if not axes:
        return None if ctx.attr("noop_with_empty_axes", 0) else list(range(rank))
    return sorted({normalize_axis(a, rank, "axes") for a in axes})


@lowering(*reduce_ops())
def lower_reduce(ctx) -> None:
    x = ctx.inputs[0]
    axes = reduce_axes(ctx)
    t = compute_type(x.dtype)
    if axes is None:  # noop_with_empty_axes: the op's map applied elementwise, no reduction
        stats = _reduce_stats(ctx.op, t if t != "bool" else "u32")
        return _noop_reduce(ctx, x, stats)
    keep = ctx.attr("keepdims", 1)
    shape = [1 if a in axes else d for a, d in enumerate(x.shape) if keep or a not in axes]
    if ctx.op in HOST_REDUCE and x.sym is not None and D.is_static(x.shape):
        return ctx.set_host(0, x.dtype, shape, host_reduce(ctx.op, x.sym, [int(d) for d in x.shape], axes))
    out = ctx.output(0, x.dtype, shape)
    if t == "bool":  # ReduceMax/Min on bool: any/all
        stats = [Stat("u32", *("0u", "max({a}, {b})") if ctx.op == "ReduceMax" else ("1u", "min({a}, {b})"),
                      "select(0u, 1u, v)")]
        return row_kernel(ctx, x, axes, stats, row_outs=[("out", out, "s0 != 0u")])
    stats = _reduce_stats(ctx.op, t)
    k = len(stats) - 1
    res = f"s{k}" if stats[k].type == t else f"{t}(s{k})"
    row_kernel(ctx, x, axes, stats, row_outs=[("out", out, res)])


# Reductions of small integer tensors of shape arithmetic (``min(#boxes NMS kept, keep_top_k)`` as the k of a
# TopK): evaluated on the host over dims, so a symbolic count stays an expression.
HOST_REDUCE = {"ReduceMin": D.dmin, "ReduceMax": D.dmax, "ReduceSum": D.add, "ReduceProd": D.mul}


def host_reduce(op: str, values: list, shape: list[int], axes: list[int]) -> list:
    """``op`` over ``axes`` of the row-major ``values`` of ``shape`` (the kept axes' order)."""
    fn, out = HOST_REDUCE[op], {}
    for flat, v in enumerate(values):
        idx, rest = [], flat
        for d in reversed(shape):
            idx.append(rest % d)
            rest //= d
        key = tuple(i for a, i in enumerate(reversed(idx)) if a not in axes)
        out[key] = v if key not in out else fn(out[key], v)
    return [out[k] for k in sorted(out)]


def _noop_reduce(ctx, x, stats) -> None:
    """Reduce over no axes: every row has one element, so the row kernel still computes the op."""
    if ctx.op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"):
        ctx.set_alias(0, x, x.shape)
        return
    out = ctx.output(0, x.dtype, x.shape)
    t = compute_type(x.dtype)
    k = len(stats) - 1
    row_kernel(ctx, x, [], stats, row_outs=[("out", out, f"s{k}" if stats[k].type == t else f"{t}(s{k})")])


# --- ArgMax / ArgMin --------------------------------------------------------------------------------

@lowering("ArgMax", "ArgMin")
def lower_arg(ctx) -> None:
    x = ctx.inputs[0]
    axis = normalize_axis(ctx.attr("axis", 0), x.rank)
    keep = ctx.attr("keepdims", 1)
    shape = [1 if a == axis else d for a, d in enumerate(x.shape) if keep or a != axis]
    out = ctx.output(0, "int64", shape)
    t = compute_type(x.dtype)
    t = "u32" if t == "bool" else t
    val = "select(0u, 1u, v)" if compute_type(x.dtype) == "bool" else "v"
    best = max_stat(t, val, nan=True) if ctx.op == "ArgMax" else min_stat(t, val, nan=True)
    if ctx.attr("select_last_index", 0):
        index = Stat("u32", "0u", "max({a}, {b})", f"select(0u, r, {same(t, val, 's0')})")
    else:
        index = Stat("u32", "4294967295u", "min({a}, {b})", f"select(4294967295u, r, {same(t, val, 's0')})")
    row_kernel(ctx, x, [axis], [best, index], row_outs=[("out", out, "i32(s1)")])


def literal(value: float) -> str:
    return wgsl_literal(value, "f32")


# --- CumSum / CumProd: the row kernel in scan mode (one invocation walks each row), chunked past the limit

@lowering("CumSum", "CumProd")
def lower_cumulative(ctx) -> None:
    x = ctx.inputs[0]
    axis = ctx.host_ints(1)
    if axis is None or not D.is_static(axis) or len(axis) != 1:
        raise ctx.unsupported("axis must be a constant scalar")
    axis = normalize_axis(axis[0], max(x.rank, 1))
    t = compute_type(x.dtype)
    out = ctx.output(0, x.dtype, x.shape)
    prod = ctx.op == "CumProd"
    scan = {"out": out, "type": t, "init": f"{t}({int(prod)})", "combine": "acc * v" if prod else "acc + v",
            "exclusive": bool(ctx.attr("exclusive", 0)),
            "reverse": bool(ctx.attr("reverse", 0))}
    kept, red = split_axes(x.shape, {axis} if x.rank else set())
    n = D.product([r for r, _ in red])
    bound = row_bound(ctx, n)
    if bound is None or bound >= LOOP_BUDGET:  # one invocation a row would pass lavapipe's loop limit
        return chunked_scan(ctx, x, kept, red, scan)
    row_kernel(ctx, x, [axis] if x.rank else [], [], scan=scan)
