"""Dropout at inference: the identity (a view), with a mask of ones when the mask output is asked for.

Training-mode dropout with a non-zero ratio draws random numbers nobody can reproduce, so it is not
supported: when training_mode is only known at run time, the kernel copies x when training is off or the
ratio is 0, and otherwise writes NaN rather than a silently different result.
"""

from __future__ import annotations

import numpy as np

from ..registry import lowering


def _known(ctx, i: int):
    """The constant value of optional input ``i``, None when absent, ``...`` when only known at run time."""
    if not ctx.has_input(i):
        return None
    t = ctx.inputs[i]
    return np.asarray(t.value).reshape(-1)[0] if t.value is not None else ...


@lowering("Dropout")
def lower_dropout(ctx) -> None:
    x = ctx.inputs[0]
    ratio, training = _known(ctx, 1), _known(ctx, 2)
    want_mask = len(ctx.node.outputs) > 1 and bool(ctx.node.outputs[1].name)
    if training is None or (training is not ... and (not training or ratio == 0)):
        ctx.set_alias(0, x, x.shape)
        if want_mask:
            mask = ctx.output(1, "bool", x.shape)
            ctx.dispatch("misc.wgsl.j2", {}, {"mask": mask}, work=mask.numel, params={"n": mask.numel},
                         kind="ones")
        return
    if training is not ... or ratio is None:
        raise ctx.unsupported("training-mode dropout with a non-zero ratio is random")
    writes = {"y": ctx.output(0, x.dtype, x.shape)}
    if want_mask:
        writes["mask"] = ctx.output(1, "bool", x.shape)
    reads = {"x": ctx.gpu(x), "t": ctx.gpu(ctx.inputs[2])}
    if ratio is ...:
        reads["r"] = ctx.gpu(ctx.inputs[1])
    ctx.dispatch("misc.wgsl.j2", reads, writes, work=x.numel, params={"n": x.numel}, kind="dropout",
                 ratio_const=None if ratio is ... else f"{float(ratio)}", want_mask=want_mask)
