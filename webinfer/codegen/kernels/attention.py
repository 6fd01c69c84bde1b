"""Attention (opset 23) and RotaryEmbedding.

Attention: K and V (with past_key/past_value prepended) are packed into the present layout
[batch, kv_heads, total, head] by a copy kernel (these are the present outputs when asked for). Then one
invocation per (batch, q head, query) loops over keys three times: the max of the scores, then the
exponentials weighted into V, then (only for qk_matmul_output_mode 3) the probabilities. Scores get
scale, softcap, the float/bool mask (padded with -inf past its last axis), the causal mask (offset by
the past length) and nonpad_kv_seqlen, as onnx.reference does. Grouped-query heads share kv head
``h / (q_heads / kv_heads)``.
"""

from __future__ import annotations

import math

from ... import dims as D
from ..emit import wgsl_literal
from ..registry import lowering
from .cached_attention import FLASH_BQ, FLASH_TILE_FLOATS, head_unroll, serial_rows, serial_sharing
from .helpers import broadcast_strides, compute_type
from .loop_limit import check_loop

WG = 64
SERIAL_WG = 16  # software class: more, smaller workgroups spread over the CPU's threads
MAX_HEAD = 1024
FLASH_MAX_HEAD = 256  # q and the output accumulator live in registers: 2 x 64 vec4 at most


def _heads(ctx, t, attr: str):
    """(batch, heads, seq, head size, strides (b, h, s)) of a 3-D or 4-D Q/K/V input."""
    if t.rank == 4:
        b, h, s, d = t.shape
        return b, h, s, d, (h * s * d, s * d, d)
    b, s, hidden = t.shape
    h = ctx.attr(attr)
    if h is None:
        raise ctx.unsupported(f"3-D inputs need the {attr} attribute")
    d = hidden // h
    return b, h, s, d, (s * hidden, d, hidden)


def _pack(ctx, i_new: int, i_past: int, out_index: int, layout) -> tuple[object, tuple]:
    """present = concat(past, new) along the sequence axis, in [batch, heads, total, head] layout; with
    neither a past nor a present output the input itself, read through its strides (no copy).
    Returns (tensor, its (batch, head, position) strides)."""
    b, h, s, d, strides = layout
    past = ctx.inputs[i_past] if ctx.has_input(i_past) else None
    named = out_index < len(ctx.node.outputs) and ctx.node.outputs[out_index].name
    if past is None and not named:
        return ctx.gpu(ctx.inputs[i_new]), strides
    p = past.shape[2] if past is not None else 0
    shape = (b, h, p + s, d)
    out = ctx.output(out_index, ctx.inputs[i_new].dtype, shape) if named else ctx.temp(ctx.inputs[i_new].dtype, shape)
    reads = {"x": ctx.gpu(ctx.inputs[i_new])}
    if past is not None:
        reads["past"] = ctx.gpu(past)
    params = {"n": out.numel, "h": h, "t": p + s, "d": d, "p": p, "sb": strides[0], "sh": strides[1],
              "ss": strides[2]}
    ctx.dispatch("attention.wgsl.j2", reads, {"out": out}, work=out.numel, params=params, kind="pack",
                 has_past=past is not None)
    return out, (h * (p + s) * d, (p + s) * d, d)


def _packed(ctx) -> tuple[list, tuple]:
    """webinfer.Attention with ``qkv_packed``: input 0 is concat(q, k, v) along its last axis, [b, s,
    (q heads + 2 kv heads) * head] (fuse_attention's merged projection); the layouts of q, k, v in it and
    their column offsets. No past, no present outputs."""
    qkv = ctx.inputs[0]
    hq, hkv = ctx.attr("q_num_heads"), ctx.attr("kv_num_heads")
    named = any(o.name for o in ctx.node.outputs[1:])
    if qkv.rank != 3 or hq is None or hkv is None or ctx.has_input(4) or ctx.has_input(5) or named:
        raise ctx.unsupported("packed q/k/v must be 3-D with both head counts, without past or present")
    b, s, width = qkv.shape
    d = width // (hq + 2 * hkv)
    strides = (s * width, d, width)
    return [(b, h, s, d, strides) for h in (hq, hkv, hkv)], (0, hq * d, (hq + hkv) * d)


@lowering("Attention")
def lower_attention(ctx) -> None:
    q, k, v = (list(ctx.inputs) + [None, None])[:3]  # packed q/k/v: one input
    if ctx.attr("qkv_packed", 0):
        (ql, kl, vl), offsets = _packed(ctx)
        k = v = q
        (pk, kstr), (pv, vstr) = (ctx.gpu(q), kl[4]), (ctx.gpu(q), vl[4])
    else:
        ql, kl, vl = _heads(ctx, q, "q_num_heads"), _heads(ctx, k, "kv_num_heads"), _heads(ctx, v, "kv_num_heads")
        offsets = (0, 0, 0)
    bq, hq, sq, dq, qstr = ql
    dv = vl[3]
    if not all(isinstance(x, int) for x in (hq, kl[1], dq, dv)) or dv > MAX_HEAD:
        raise ctx.unsupported("head counts and sizes must be fixed (head size <= 1024)")
    if not ctx.attr("qkv_packed", 0):
        (pk, kstr), (pv, vstr) = _pack(ctx, 1, 4, 1, kl), _pack(ctx, 2, 5, 2, vl)
    past = ctx.inputs[4].shape[2] if ctx.has_input(4) else 0
    total = D.add(past, kl[2])
    out_shape = (bq, hq, sq, dv) if q.rank == 4 else (bq, sq, hq * dv)
    out = ctx.output(0, q.dtype, out_shape)
    ostr = (hq * sq * dv, sq * dv, dv) if q.rank == 4 else (sq * hq * dv, dv, hq * dv)
    reads = {"q": ctx.gpu(q), "k": pk, "v": pv}
    writes = {"out": out}
    params = {"n": bq * hq * sq, "hq": hq, "sq": sq, "t": total, "past": past, "group": hq // kl[1],
              "hkv": kl[1], "qb": qstr[0], "qh": qstr[1], "qs": qstr[2], "ob": ostr[0], "oh": ostr[1],
              "os": ostr[2], "kb": kstr[0], "kh": kstr[1], "ks": kstr[2], "vb": vstr[0], "vh": vstr[1],
              "vs": vstr[2], "q0": offsets[0], "k0": offsets[1], "v0": offsets[2]}
    check_loop(ctx, total, "the attended length (past + new keys)")
    mask = ctx.inputs[3] if ctx.has_input(3) else None
    if mask is not None:
        reads["mask"] = ctx.gpu(mask)
        tm = mask.shape[-1]
        for name, s in zip(("mb", "mh", "ms"), broadcast_strides(mask.shape, (bq, hq, sq, tm))[:3]):
            params[name] = s
        params["tm"] = tm
    if ctx.has_input(6):
        reads["nonpad"] = ctx.gpu(ctx.inputs[6])
    mode = int(ctx.attr("qk_matmul_output_mode", 0))
    if len(ctx.node.outputs) > 3 and ctx.node.outputs[3].name:
        writes["qk"] = ctx.output(3, q.dtype, (bq, hq, sq, total))
    scale = ctx.attr("scale")
    scale = 1.0 / math.sqrt(dq) if scale is None else float(scale)
    softcap = float(ctx.attr("softcap", 0.0) or 0.0)
    flags = dict(scale=wgsl_literal(scale, "f32"), softcap=wgsl_literal(softcap, "f32") if softcap > 0 else None,
                 causal=bool(ctx.attr("is_causal", 0)), mask=mask is not None,
                 bool_mask=mask is not None and mask.dtype == "bool", nonpad="nonpad" in reads, dq=dq, dv=dv)
    if ctx.kclass.attention == "flash" and "qk" not in writes and dq % 4 == 0 and dv % 4 == 0 \
            and max(dq, dv) <= FLASH_MAX_HEAD:
        # GPU class: K/V tiles in workgroup memory (FLASH_TILE_FLOATS floats of K and of V), one pass
        f16 = ctx.kclass.use_f16  # gpu-f16: f16 tiles and q.k products
        bk = max(1, min(16, FLASH_TILE_FLOATS * (2 if f16 else 1) // max(dq, dv)))
        ctx.dispatch("attention.wgsl.j2", reads, writes, grid=(D.ceildiv(sq, FLASH_BQ), D.mul(bq, hq), 1),
                     params=params, wg=FLASH_BQ, kind="flash", bq=FLASH_BQ, bk=bk, vec4_vars=["k", "v"], f16=f16,
                     uk=head_unroll(dq // 4, total), uv=head_unroll(dv // 4, total), **flags)
        return
    if ctx.kclass.attention == "serial" and "qk" not in writes and dq % 4 == 0 and dv % 4 == 0 \
            and max(dq, dv) <= FLASH_MAX_HEAD and q.dtype == "float32":
        # software class: registers only, one pass (d % 4 == 0 makes every K/V stride and offset a whole vec4)
        rows = serial_rows(max(dq, dv))
        rows = rows if not isinstance(sq, int) or sq >= rows else 1
        n = D.mul(bq * hq, D.ceildiv(sq, rows))
        ctx.dispatch("attention.wgsl.j2", reads, writes, work=n, params={**params, "n": n},
                     wg=SERIAL_WG, kind="serial", rows=rows, vec4_vars=["k", "v"], uq=head_unroll(dq // 4, total),
                     uv=head_unroll(dv // 4, total), **serial_sharing(ctx, SERIAL_WG, dq, dv), **flags)
        return
    ctx.dispatch("attention.wgsl.j2", reads, writes, work=bq * hq * sq, params=params, wg=WG, kind="attend",
                 qk="qk" in writes, mode=mode, **flags)


@lowering("RotaryEmbedding")
def lower_rotary(ctx) -> None:
    x, cos, sin = ctx.inputs[:3]
    pos = ctx.inputs[3] if ctx.has_input(3) else None
    if x.rank == 4:
        b, h, s, d = x.shape
        strides = (h * s * d, s * d, d)
    else:
        b, s, hidden = x.shape
        h = ctx.attr("num_heads")
        if h is None:
            raise ctx.unsupported("3-D input needs num_heads")
        d = hidden // h
        strides = (s * hidden, d, hidden)
    rot = int(ctx.attr("rotary_embedding_dim", 0) or 0) or d
    out = ctx.output(0, x.dtype, x.shape)
    reads = {"x": ctx.gpu(x), "cos": ctx.gpu(cos), "sin": ctx.gpu(sin)}
    if pos is not None:
        reads["pos"] = ctx.gpu(pos)
    params = {"n": out.numel, "h": h, "s": s, "d": d, "half": rot // 2, "rot": rot, "sb": strides[0],
              "sh": strides[1], "ss": strides[2], "cs": cos.shape[-1]}
    ctx.dispatch("attention.wgsl.j2", reads, {"out": out}, work=out.numel, params=params, kind="rotary",
                 interleaved=bool(ctx.attr("interleaved", 0)), has_pos=pos is not None, ct=compute_type(x.dtype))
