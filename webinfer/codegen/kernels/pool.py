"""MaxPool (with Indices), AveragePool, LpPool and their Global forms, over 1-3 spatial dims.

One invocation per output element walks its window. The window geometry (pads, auto_pad, ceil_mode,
dilations) is shared with Conv (``conv.window``).
"""

from __future__ import annotations

from ... import dims as D
from ..registry import lowering
from ._floats import helper_sources
from .conv import Window, window, window_params
from .helpers import compute_type
from .loop_limit import check_loop, nested
from .reduce import LOOP_BUDGET, max_stat, row_kernel, sum_stat

_INIT = {"f32": "bitcast<f32>(0xff800000u)", "i32": "i32(-2147483647i - 1i)", "u32": "0u"}


def pool(ctx, mode: str, win: Window, *, include_pad: bool = False, p: int = 2) -> None:
    x = ctx.inputs[0]
    r = x.rank - 2
    if r < 1 or r > 3:
        raise ctx.unsupported(f"pooling over {r} spatial dims")
    in_sp = list(x.shape[2:])
    indices = mode == "max" and len(ctx.node.outputs) > 1 and bool(ctx.node.outputs[1].name)
    if not indices and _whole_input(win, in_sp) and (nested(*win.kernel) or 0) >= LOOP_BUDGET:
        # one window over the whole input, past lavapipe's loop limit: the global form's row kernel
        return _lp_rows(ctx, x, p) if mode == "lp" else global_pool(ctx, mean=mode == "avg")
    out = ctx.output(0, x.dtype, tuple(x.shape[:2]) + tuple(win.out))
    writes = {"out": out}
    if indices:
        writes["idx"] = ctx.output(1, "int64", out.shape)
    storage_order = int(ctx.attr("storage_order", 0))
    check_loop(ctx, nested(*win.kernel), "the loops over the pooling window")
    params = {"total": out.numel, "P": D.product(win.out), "isp": D.product(in_sp), **window_params(win, in_sp)}
    ct = compute_type(x.dtype)
    greater = "less_nan(acc, v)" if ct == "f32" else "v > acc"
    ctx.dispatch("pool.wgsl.j2", {"x": ctx.gpu(x)}, writes, work=out.numel, params=params, rank=r, mode=mode,
                 ct=ct, init=_INIT[ct] if mode == "max" else f"{ct}(0)", include_pad=include_pad, lp=int(p),
                 indices=indices, col_major=storage_order == 1, greater=greater,
                 helpers=helper_sources(greater) if mode == "max" else [])


def _kernel(ctx):
    k = ctx.attr("kernel_shape")
    if k is None:
        raise ctx.unsupported("kernel_shape is required")
    return [int(v) for v in k]


@lowering("MaxPool")
def lower_maxpool(ctx) -> None:
    win = window(ctx, list(ctx.inputs[0].shape[2:]), _kernel(ctx), bool(ctx.attr("ceil_mode", 0)))
    pool(ctx, "max", win)


@lowering("AveragePool")
def lower_averagepool(ctx) -> None:
    win = window(ctx, list(ctx.inputs[0].shape[2:]), _kernel(ctx), bool(ctx.attr("ceil_mode", 0)))
    pool(ctx, "avg", win, include_pad=bool(ctx.attr("count_include_pad", 0)))


@lowering("LpPool")
def lower_lppool(ctx) -> None:
    win = window(ctx, list(ctx.inputs[0].shape[2:]), _kernel(ctx), bool(ctx.attr("ceil_mode", 0)))
    pool(ctx, "lp", win, include_pad=True, p=ctx.attr("p", 2))


def _global_window(x) -> Window:
    sp = list(x.shape[2:])
    r = len(sp)
    return Window(sp, [1] * r, [1] * r, [0] * r, [1] * r, [0] * r)


def global_pool(ctx, mean: bool) -> None:
    """A row per (n, c) over the spatial dims, with the reductions' kernel: a window of 512 x 512 walked by one
    invocation would be slow, summed in one long float chain, and cut short by lavapipe's loop limit."""
    x = ctx.inputs[0]
    if x.rank < 3:
        raise ctx.unsupported(f"global pooling of a rank-{x.rank} input")
    out = ctx.output(0, x.dtype, tuple(x.shape[:2]) + (1,) * (x.rank - 2))
    t = compute_type(x.dtype)
    stat = sum_stat(t, final=f"{{a}} / {t}(n_R)") if mean else max_stat(t, nan=True)
    row_kernel(ctx, x, list(range(2, x.rank)), [stat], row_outs=[("out", out, "s0")])


@lowering("GlobalMaxPool")
def lower_global_maxpool(ctx) -> None:
    global_pool(ctx, mean=False)


@lowering("GlobalAveragePool")
def lower_global_avgpool(ctx) -> None:
    global_pool(ctx, mean=True)


@lowering("GlobalLpPool")
def lower_global_lppool(ctx) -> None:
    """Past lavapipe's loop limit (a 300 x 300 window in one invocation), the row kernel as GlobalAveragePool's:
    sum |v|^p, then its p-th root; smaller windows keep the pooling kernel."""
    x = ctx.inputs[0]
    window = D.product(x.shape[2:])
    if x.rank < 3 or compute_type(x.dtype) != "f32" or isinstance(window, int) and window < LOOP_BUDGET:
        return pool(ctx, "lp", _global_window(x), include_pad=True, p=ctx.attr("p", 2))
    _lp_rows(ctx, x, int(ctx.attr("p", 2)))


def _whole_input(win: Window, in_sp: list) -> bool:
    """One window covering the input exactly: no padding, no dilation, one output position."""
    return (list(win.kernel) == in_sp and all(o == 1 for o in win.out) and not any(win.pads) and not any(win.ends)
            and all(d == 1 for d in win.dilations))


def _lp_rows(ctx, x, p: int) -> None:
    """(sum |v|^p)^(1/p) per (n, c) over the spatial dims, by the reductions' row kernel."""
    out = ctx.output(0, x.dtype, tuple(x.shape[:2]) + (1,) * (x.rank - 2))
    lit = f"{float(p)!r}"
    stat = sum_stat("f32", f"pow(abs(v), {lit})", f"pow({{a}}, 1.0 / {lit})")
    row_kernel(ctx, x, list(range(2, x.rank)), [stat], row_outs=[("out", out, "s0")])
