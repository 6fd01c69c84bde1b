"""Ops with a recurrent state, as in Mamba / gated-delta-net decoders: LinearAttention and CausalConvWithState.

LinearAttention: the state S (d_k x d_v per kv head) evolves per step t: gated rules decay it by
exp(decay_t), delta rules correct the value by what S already retrieves for k_t (v' = beta (v - S^T k)),
then S += k_t v'^T and every query head of the group reads o = scale q_t^T S. Column m of S depends only on
column m, so one invocation per (batch, kv head, m) walks the sequence with its column in the state buffer
(present_state, or a temporary) and writes column m of each group's outputs.

CausalConvWithState: a depthwise causal conv1d over the past state (k - 1 positions, or zeros) followed by
the input, with an optional SiLU; present_state is the last k - 1 positions of that padded input.
"""

from __future__ import annotations

import math

from ... import dims as D
from ..registry import lowering
from .reduce import literal

_RULES = {"linear": (False, False), "gated": (True, False), "delta": (False, True), "gated_delta": (True, True)}


def _wanted(ctx, i: int) -> bool:
    outs = ctx.node.outputs
    return i < len(outs) and outs[i] is not None and bool(outs[i].name)


def _static(ctx, value, what: str) -> int:
    if not isinstance(value, int):
        raise ctx.unsupported(f"{what} must be static")
    return value


@lowering("LinearAttention")
def lower_linear_attention(ctx) -> None:
    q, k, v = ctx.inputs[:3]
    rule = ctx.attr("update_rule", "gated_delta")
    rule = rule.decode() if isinstance(rule, bytes) else rule
    if rule not in _RULES:
        raise ctx.unsupported(f"update_rule {rule!r}")
    gating, delta = _RULES[rule]
    hq, hkv = ctx.attr("q_num_heads"), ctx.attr("kv_num_heads")
    if not hq or not hkv or hq % hkv or q.rank != 3 or k.rank != 3 or v.rank != 3:
        raise ctx.unsupported("needs q_num_heads, a multiple of kv_num_heads, and 3-D query/key/value")
    if gating != ctx.has_input(4) or delta != ctx.has_input(5):
        raise ctx.unsupported(f"update_rule {rule!r} takes decay: {gating}, beta: {delta}")
    dk = _static(ctx, q.shape[2], "the query width") // hq
    dv = _static(ctx, v.shape[2], "the value width") // hkv
    batch, steps = q.shape[0], q.shape[1]
    scale = ctx.attr("scale", 0.0) or 1.0 / math.sqrt(dk)
    out = ctx.output(0, q.dtype, (batch, steps, hq * dv))
    state_shape = (batch, hkv, dk, dv)
    past = ctx.inputs[3] if ctx.has_input(3) else None
    state = ctx.output(1, past.dtype if past is not None else q.dtype, state_shape) if _wanted(ctx, 1) \
        else ctx.temp("float32", state_shape)
    reads = {"q": q, "k": k, "v": v}
    params: dict = {"n": D.product([batch, hkv, dv]), "T": steps, "DK": dk, "DV": dv, "HKV": hkv, "G": hq // hkv}
    if past is not None:
        reads["past"] = past
    if gating:
        reads["decay"] = ctx.inputs[4]
        width = ctx.inputs[4].shape[-1]
        if width not in (hkv, hkv * dk):
            raise ctx.unsupported(f"decay's last dim {width} is neither kv_num_heads nor kv_num_heads * d_k")
        params["gw"], params["gd"] = width, int(width != hkv)
    if delta:
        reads["beta"] = ctx.inputs[5]
        width = ctx.inputs[5].shape[-1]
        if width not in (hkv, 1):
            raise ctx.unsupported(f"beta's last dim {width} is neither kv_num_heads nor 1")
        params["bw"] = width
    if D.product([batch, hkv, dv]) == 0:
        return
    ctx.dispatch("linear_attention.wgsl.j2", {n: ctx.gpu(t) for n, t in reads.items()},
                 {"out": out, "state": state}, work=params["n"], params=params, wg=64,
                 gating=gating, delta=delta, has_past=past is not None, scale=literal(scale))


@lowering("CausalConvWithState")
def lower_causal_conv_with_state(ctx) -> None:
    x, w = ctx.inputs[0], ctx.inputs[1]
    if x.rank != 3 or w.rank != 3:
        raise ctx.unsupported("input [batch, channels, length] and weight [channels, 1, k]")
    act = ctx.attr("activation", "none")
    act = act.decode() if isinstance(act, bytes) else act
    if act not in ("none", "silu", "swish"):
        raise ctx.unsupported(f"activation {act!r}")
    b, c, length = x.shape
    taps = _static(ctx, w.shape[2], "the kernel size")
    past = ctx.inputs[3] if ctx.has_input(3) else None
    reads = {"x": ctx.gpu(x), **({"past": ctx.gpu(past)} if past is not None else {})}
    params = {"C": c, "L": length, "K1": taps - 1}
    out = ctx.output(0, x.dtype, x.shape)
    tctx = {"has_past": past is not None, "has_bias": ctx.has_input(2), "silu": act != "none", "taps": taps}
    if out.numel != 0:
        conv_reads = dict(reads, w=ctx.gpu(w), **({"bias": ctx.gpu(ctx.inputs[2])} if ctx.has_input(2) else {}))
        ctx.dispatch("causal_conv.wgsl.j2", conv_reads, {"out": out}, work=out.numel,
                     params={"n": out.numel, **params}, kind="conv", **tctx)
    if _wanted(ctx, 1):
        present = ctx.output(1, past.dtype if past is not None else x.dtype, (b, c, taps - 1))
        if present.numel != 0:
            ctx.dispatch("causal_conv.wgsl.j2", reads, {"out": present}, work=present.numel,
                         params={"n": present.numel, **params}, kind="state", **tctx)
