"""Softmax and normalizations on the row-wise reduction kernel (``reduce.row_kernel``): per row a few
statistics (max, sum, mean, variance), then one expression per element. Accumulation is f32."""

from __future__ import annotations

from ... import dims as D
from ...dtypes import is_float
from ..registry import lowering
from .helpers import normalize_axis
from .reduce import Stat, literal, max_stat, row_kernel, sum_stat

MEAN = sum_stat("f32", "v", "{a} / f32(n_R)")
VARIANCE = sum_stat("f32", "(v - s0) * (v - s0)", "{a} / f32(n_R)")
MEAN_SQUARE = sum_stat("f32", "v * v", "{a} / f32(n_R)")
FIRST_MAX = Stat("u32", "4294967295u", "min({a}, {b})", "select(4294967295u, r, same_nan(v, s0))")

# op -> (statistics, expression per element)
_SOFTMAX = {
    "Softmax": ([max_stat("f32"), sum_stat("f32", "exp(v - s0)")], "exp(v - s0) / s1"),
    "LogSoftmax": ([max_stat("f32"), sum_stat("f32", "exp(v - s0)")], "v - s0 - log(s1)"),
    "Hardmax": ([max_stat("f32", nan=True), FIRST_MAX], "select(0.0, 1.0, r == s1)"),
}


def _float_input(ctx, i: int = 0):
    x = ctx.inputs[i]
    if not is_float(x.dtype):
        raise ctx.unsupported(f"input type {x.dtype} (expected a float type)")
    return x


def _trailing_axes(ctx, axis: int) -> list[int]:
    return list(range(axis, ctx.inputs[0].rank))


@lowering("Softmax", "LogSoftmax", "Hardmax")
def lower_softmax(ctx) -> None:
    x = _float_input(ctx)
    stats, expr = _SOFTMAX[ctx.op]
    if ctx.opset >= 13:
        axes = [normalize_axis(ctx.attr("axis", -1), x.rank)] if x.rank else []
    else:  # opset < 13: the input is flattened to 2-D at axis
        axes = _trailing_axes(ctx, normalize_axis(ctx.attr("axis", 1), x.rank)) if x.rank else []
    out = ctx.output(0, x.dtype, x.shape)
    row_kernel(ctx, x, axes, stats, elem_out=(out, expr))


def _wanted(ctx, i: int) -> bool:
    outs = ctx.node.outputs
    return i < len(outs) and outs[i] is not None and bool(outs[i].name)


def _per_row_input(ctx, i: int, var: str, n, index: str, reads: dict) -> str:
    """Load expression of a scale/bias input read at ``index`` (or its only element)."""
    t = ctx.inputs[i]
    numel = D.product(t.shape)
    if numel == 1:
        index = "0u"
    elif numel != n:
        raise ctx.unsupported(f"input {i} of shape {list(t.shape)} is not broadcast (unsupported)")
    reads[var] = t
    return f"ld_{var}({index})"


def _with_epilogue(epilogue, expr: str, reads: dict) -> tuple[str, dict]:
    """The norm's per-element expression ``expr`` followed by a fused program (codegen/kernels/fused.py):
    ``epilogue(expr)`` gives (WGSL lines, result, extra reads, helpers); row_kernel's keywords."""
    if epilogue is None:
        return expr, {}
    lines, result, extra, helpers = epilogue(expr)
    reads.update(extra)
    return result, {"elem_lets": lines, "helpers": helpers}


@lowering("LayerNormalization")
def lower_layer_norm(ctx, epilogue=None) -> None:
    x = _float_input(ctx)
    axis = normalize_axis(ctx.attr("axis", -1), x.rank)
    eps = literal(ctx.attr("epsilon", 1e-5))
    n = D.product(x.shape[axis:])
    reads: dict = {}
    expr = f"(v - s0) * inverseSqrt(s1 + {eps}) * {_per_row_input(ctx, 1, 'scale', n, 'r', reads)}"
    if ctx.has_input(2):
        expr += f" + {_per_row_input(ctx, 2, 'bias', n, 'r', reads)}"
    out = ctx.output(0, x.dtype, x.shape)
    stat_shape = list(x.shape[:axis]) + [1] * (x.rank - axis)
    row_outs = []
    if _wanted(ctx, 1):
        row_outs.append(("mean", ctx.output(1, "float32", stat_shape), "s0"))
    if _wanted(ctx, 2):
        row_outs.append(("inv", ctx.output(2, "float32", stat_shape), f"inverseSqrt(s1 + {eps})"))
    expr, more = _with_epilogue(epilogue, expr, reads)
    row_kernel(ctx, x, _trailing_axes(ctx, axis), [MEAN, VARIANCE], row_outs, (out, expr), reads, **more)


@lowering("RMSNormalization")
def lower_rms_norm(ctx, epilogue=None) -> None:
    x = _float_input(ctx)
    axis = normalize_axis(ctx.attr("axis", -1), x.rank)
    eps = literal(ctx.attr("epsilon", 1e-5))
    reads: dict = {}
    scale = _per_row_input(ctx, 1, "scale", D.product(x.shape[axis:]), "r", reads)
    out = ctx.output(0, x.dtype, x.shape)
    expr, more = _with_epilogue(epilogue, _rms(eps, scale), reads)
    row_kernel(ctx, x, _trailing_axes(ctx, axis), [MEAN_SQUARE], (), (out, expr), reads, **more)


def _rms(eps: str, scale: str) -> str:
    """RMSNorm's expression per element over the MEAN_SQUARE statistic (``eps`` a WGSL literal)."""
    return f"v / sqrt(s0 + {eps}) * {scale}"


def rms_rows(ctx, x, scale, eps: float, when=None):
    """x's rows RMS-normalized into a temporary, once per (x, scale, eps, when) for every matmul that absorbed
    the norm (graph/passes/absorb_norms.py) but normalizes in a kernel of its own."""
    def make():
        out = ctx.temp("float32", x.shape)
        row_kernel(ctx, x, [x.rank - 1], [MEAN_SQUARE], (), (out, _rms(literal(eps), "ld_scale(r)")),
                   {"scale": scale}, when=when)
        return out

    return ctx.shared(("rms_rows", x.id, scale.id, float(eps), repr(when)), make)


@lowering("InstanceNormalization")
def lower_instance_norm(ctx) -> None:
    x = _float_input(ctx)
    eps = literal(ctx.attr("epsilon", 1e-5))
    c = x.shape[1]
    reads: dict = {}
    scale = _per_row_input(ctx, 1, "scale", c, "row % n_C", reads)
    bias = _per_row_input(ctx, 2, "bias", c, "row % n_C", reads)
    out = ctx.output(0, x.dtype, x.shape)
    expr = f"(v - s0) * inverseSqrt(s1 + {eps}) * {scale} + {bias}"
    row_kernel(ctx, x, list(range(2, x.rank)), [MEAN, VARIANCE], (), (out, expr), reads, named={"C": c})


@lowering("GroupNormalization")
def lower_group_norm(ctx) -> None:
    """Rows are (batch, group); opset 18 scales per group, opset 21 per channel."""
    x = _float_input(ctx)
    eps = literal(ctx.attr("epsilon", 1e-5))
    g = int(ctx.attr("num_groups"))
    n, c = x.shape[0], x.shape[1]
    if not isinstance(c, int) or c % g:
        raise ctx.unsupported(f"{c} channels do not split into {g} groups")
    spatial = D.product(x.shape[2:])
    per_channel = D.product(ctx.inputs[1].shape) == c and (ctx.opset >= 21 or g == c)
    index = "(row % n_G) * n_CG + r / n_S" if per_channel else "row % n_G"
    reads: dict = {}
    size = c if per_channel else g
    scale = _per_row_input(ctx, 1, "scale", size, index, reads)
    bias = _per_row_input(ctx, 2, "bias", size, index, reads)
    out = ctx.output(0, x.dtype, x.shape)
    expr = f"(v - s0) * inverseSqrt(s1 + {eps}) * {scale} + {bias}"
    row_kernel(ctx, x, [2, 3], [MEAN, VARIANCE], (), (out, expr), reads,
               named={"G": g, "CG": c // g, "S": spatial}, shape=(n, g, c // g, spatial))


@lowering("MeanVarianceNormalization")
def lower_mvn(ctx) -> None:
    x = _float_input(ctx)
    axes = sorted({normalize_axis(a, x.rank) for a in ctx.attr("axes", [0, 2, 3])})
    out = ctx.output(0, x.dtype, x.shape)
    row_kernel(ctx, x, axes, [MEAN, VARIANCE], (), (out, "(v - s0) / (sqrt(s1) + 1e-9)"))


@lowering("LpNormalization")
def lower_lp_norm(ctx) -> None:
    x = _float_input(ctx)
    axis = normalize_axis(ctx.attr("axis", -1), x.rank)
    p = int(ctx.attr("p", 2))
    if p not in (1, 2):
        raise ctx.unsupported(f"p={p} (LpNormalization supports p=1 and p=2)")
    norm = sum_stat("f32", "abs(v)") if p == 1 else sum_stat("f32", "v * v", "sqrt({a})")
    out = ctx.output(0, x.dtype, x.shape)
    row_kernel(ctx, x, [axis], [norm], (), (out, "select(v / s0, 0.0, s0 == 0.0)"))


@lowering("LRN")
def lower_lrn(ctx) -> None:
    x = _float_input(ctx)
    size = int(ctx.attr("size"))
    out = ctx.output(0, x.dtype, x.shape)
    params = {"n": out.numel, "S": D.product(x.shape[2:]), "C": x.shape[1], "c1": (size - 1) // 2,
              "c2": size // 2 + 1}
    ctx.dispatch("lrn.wgsl.j2", {"x": ctx.gpu(x)}, {"out": out}, work=out.numel, params=params,
                 bias=literal(ctx.attr("bias", 1.0)), scale=literal(ctx.attr("alpha", 1e-4) / size),
                 beta=literal(ctx.attr("beta", 0.75)))
