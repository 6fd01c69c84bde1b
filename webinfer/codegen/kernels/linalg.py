"""Det: one invocation per matrix copies it into a scratch buffer and eliminates in place (Gaussian elimination
with partial pivoting, in f32); the determinant is the product of the pivots, negated per row swap."""

from __future__ import annotations

from ... import dims as D
from ..registry import lowering


@lowering("Det")
def lower_det(ctx) -> None:
    x = ctx.inputs[0]
    if x.rank < 2 or x.shape[-1] != x.shape[-2]:
        raise ctx.unsupported(f"input of shape {list(x.shape)} is not a batch of square matrices")
    out = ctx.output(0, x.dtype, x.shape[:-2])
    if out.numel == 0:
        return
    scratch = ctx.temp("float32", x.shape)
    ctx.dispatch("det.wgsl.j2", {"x": ctx.gpu(x)}, {"a": scratch, "out": out}, work=out.numel, wg=64,
                 params={"n": out.numel, "N": x.shape[-1], "NN": D.mul(x.shape[-1], x.shape[-1])})
