"""Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (its LogSoftmax over axis 1, then the same).

Each target element ``r`` of class ``t`` contributes a loss ``-logp[n, t, d] * w`` and a weight ``w``
(``weight[t]``, or 1; 0 when ``t == ignore_index``). ``reduction="none"`` writes the losses (``loss.wgsl.j2``,
one invocation per target element); ``sum``/``mean`` reduce them on the row-wise kernel
(``reduce.row_kernel``) over the targets as one row: mean is sum(loss) / sum(w), as ONNX specifies.
"""

from __future__ import annotations

from ... import dims as D
from ..registry import lowering
from .norm import _SOFTMAX
from .reduce import row_kernel, sum_stat


def _term(ignore: bool, weighted: bool) -> str:
    """WGSL: (loss, weight) of target value ``t`` at target index ``r`` (sizes passed in: they may be uniforms)."""
    skip = "  if (t == n_ign) { return vec2<f32>(0.0, 0.0); }\n" if ignore else ""
    w = "f32(ld_w(c))" if weighted else "1.0"
    return ("fn loss_term(t: i32, r: u32, n_C: u32, n_D: u32, n_ign: i32) -> vec2<f32> {\n" + skip +
            "  let c = u32(clamp(t, 0i, i32(n_C) - 1i));\n"
            f"  let w = {w};\n"
            "  return vec2<f32>(-f32(ld_lp((r / n_D * n_C + c) * n_D + r % n_D)) * w, w);\n"
            "}")


def _loss(ctx, logp) -> None:
    """The NLL of ``logp`` [N, C, d...] at the targets (input 1), weights input 2, into output 0."""
    target = ctx.inputs[1]
    if logp.rank < 2:
        raise ctx.unsupported("the input needs at least 2 dims [N, C, ...]")
    reduction = ctx.attr("reduction", "mean")
    if reduction not in ("none", "sum", "mean"):
        raise ctx.unsupported(f"reduction {reduction!r}")
    ignore = ctx.attr("ignore_index")
    weighted = ctx.has_input(2)
    named = {"C": logp.shape[1], "D": D.product(logp.shape[2:]), "ign": ("i32", ignore if ignore is not None else 0)}
    reads = {"lp": ctx.gpu(logp), **({"w": ctx.gpu(ctx.inputs[2])} if weighted else {})}
    term = _term(ignore is not None, weighted)
    if reduction == "none":
        out = ctx.output(0, logp.dtype, target.shape)
        if out.numel == 0:
            return
        params = {"n": out.numel, **{f"n_{k}": v for k, v in named.items()}}
        ctx.dispatch("loss.wgsl.j2", {"t": ctx.gpu(target), **reads}, {"out": out}, work=out.numel,
                     params=params, term=term)
        return
    out = ctx.output(0, logp.dtype, ())
    call = "loss_term(v, r, n_C, n_D, n_ign)"
    stats = [sum_stat("f32", f"{call}.x"), sum_stat("f32", f"{call}.y")]
    res = "s0 / s1" if reduction == "mean" else "s0"
    row_kernel(ctx, target, list(range(target.rank)), stats, row_outs=[("out", out, res)], reads=reads,
               named=named, helpers=[term])


@lowering("NegativeLogLikelihoodLoss")
def lower_nll_loss(ctx) -> None:
    _loss(ctx, ctx.inputs[0])


@lowering("SoftmaxCrossEntropyLoss")
def lower_softmax_cross_entropy(ctx) -> None:
    x = ctx.inputs[0]
    if x.rank < 2:
        raise ctx.unsupported("the scores need at least 2 dims [N, C, ...]")
    outs = ctx.node.outputs
    want = len(outs) > 1 and outs[1] is not None and bool(outs[1].name)
    logp = ctx.output(1, x.dtype, x.shape) if want else ctx.temp(x.dtype, x.shape)
    stats, expr = _SOFTMAX["LogSoftmax"]
    row_kernel(ctx, x, [1], stats, elem_out=(logp, expr))
    _loss(ctx, logp)
