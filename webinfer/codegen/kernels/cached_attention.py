"""webinfer.CachedAttention: write this step's keys/values into the KV cache, then attend over it.

Written by the KV-cache rewrite (graph/llm/kv_cache.py). Inputs: q [1, Hq, S, D], k_new and v_new
[1, Hkv, S, D], an additive (float) or boolean mask broadcastable to [1, Hq, S, T], and the two cache
states [1, Hkv, capacity, D]. T = past + S, where ``past`` is the cache's bound length dim. With
``bshd=1`` q, k, v (and the output) are [1, S, heads, D]; two more inputs, cos and sin [1, S, D], then
rotate q and k (rotate_half) as they are read. With ``packed_qkv=1`` (graph/llm/pack_qkv.py)
the three are one tensor [1, S, Hq + 2 Hkv, D]: each row holds q's heads, then k's, then v's. ``softcap`` > 0
caps the scaled scores as ``softcap * tanh(s / softcap)`` before the mask (Gemma 2).

Two dispatches: a copy of the S new rows into positions [past, past + S) of both caches (in place, no
copy of the rest of the cache), then one workgroup per (query head, query row) that streams the keys in
chunks with an online softmax: scores of a chunk into workgroup memory, their max and sum reduced across
the workgroup, and each invocation accumulating its own output dims from V. Grouped-query heads read kv
head ``h / (Hq / Hkv)`` directly from the cache: the heads are never expanded. The kernel classes choose
other attend kernels: the software class's serial ones (a decode row's keys split across a workgroup's
invocations and merged in it, the step's own keys/values written by the same dispatch), the GPU class's flash and
split-K ones.
"""

from __future__ import annotations

from ... import dims as D
from ..emit import wgsl_literal
from ..registry import lowering
from .helpers import broadcast_strides
from .quant_rows import FEW_ROWS, only_when
from .tiles import grid_2d, row_steps

WG = 64
CHUNK = 1024
SERIAL_WG = 16
# A speculative verification's 2..FEW_ROWS rows (codegen/kernels/quant_rows.py) where K/V loads are shared in
# subgroups: one row an invocation, a workgroup of FEW_ROWS_WG, so a head's rows are one subgroup's lanes and the
# work spreads over more workgroups than SERIAL_WG's few (lavapipe, SmolLM2-135M, 8 rows at 200 past: 35 -> 12 ms
# a step).
FEW_ROWS_WG = 8
# The software class's serial kernels take several query rows per invocation (each K/V row loaded once for
# all of them) while q and the accumulators of all the rows stay within SERIAL_FLOATS floats each: on lavapipe
# MiniLM's attention (d 32) ran 26.3 -> 9.6 ms with 4 rows (8 rows: 22.3, spilling), SmolLM2's 128-token
# prefill (d 64) TTFT 1.29 -> 1.19 s with 2 rows and 1.24 -> 1.32 s with 4 (same process, alternating).
SERIAL_FLOATS = 128
# Invocations of the software class's decode workgroup, each taking a span of the keys (a workgroup per query
# head). lavapipe, SmolLM2-135M int4 at 128 cached keys, decode-step timestamps, same process, alternating,
# medians: 8 lanes 42.7 ms, 16 lanes 44.0, the three dispatches before 46.5 (12 rounds); 32 lanes 46.6 against
# 16's 44.9 (8 rounds). 8 is one SIMD row of a software GPU: its barrier switches no fibres.
DECODE_WG = 8


# llvmpipe (lavapipe) ends every loop of an invocation, silently, once they have run LOOP_BUDGET iterations
# together (Mesa's LP_MAX_TGSI_LOOP_ITERATIONS): with a loop over the head's vec4s for each key, 512-wide heads
# lost their outputs past ~250 keys. The attention kernels' head-size loops take HEAD_UNROLL vec4s an iteration
# (written out by _unroll.wgsl.j2), more where a kernel's keys need it. Writing a 512-wide head out whole took
# lavapipe minutes to compile.
LOOP_BUDGET = 65535
HEAD_UNROLL = 16


def head_unroll(d4: int, keys=None) -> int:
    """vec4s an iteration of a head-size loop over ``d4`` vec4s takes (a divisor of d4): up to HEAD_UNROLL, more
    where an invocation's ``keys`` keys (an int: at most that many) would otherwise pass LOOP_BUDGET."""
    divisors = [u for u in range(1, d4 + 1) if d4 % u == 0]
    u = max(x for x in divisors if x <= HEAD_UNROLL)
    if isinstance(keys, int):  # per key: the key loop, the mask-limit loop, staging, and the K and V loops
        u = next((x for x in divisors if x >= u and keys * (3 + 2 * (d4 // x)) + 10 * d4 <= LOOP_BUDGET), d4)
    return u


def serial_rows(d: int) -> int:
    """Query rows per invocation of a serial attention kernel with head size ``d``."""
    return max(1, min(4, SERIAL_FLOATS // d))


# The GPU class (GPU_KERNELS.md sections 3 and 4): prefill stages keys/values in workgroup memory, FLASH_BQ
# query rows per workgroup (one per invocation), FLASH_TILE_FLOATS floats of K (and of V) per tile (8 KiB
# together in f32); decode splits the keys into blocks of SPLIT_CHUNK, one workgroup each, then merges.
FLASH_BQ = 64
FLASH_TILE_FLOATS = 1024
SPLIT_CHUNK = 256


@lowering("CachedAttention", domain="webinfer")
def lower_cached_attention(ctx) -> None:
    q, k_new, v_new, mask, kc, vc = ctx.inputs[:6]
    if kc.kind != "state" or vc.kind != "state" or kc.capacity is None:
        raise ctx.unsupported("past keys/values must be KV-cache states (built with a max sequence length)")
    fused = bool(ctx.attr("bshd", 0))  # q, k, v and the output in [b, s, heads, d]
    packed = bool(ctx.attr("packed_qkv", 0))  # q, k and v are one tensor: rows of q | k | v heads
    rotary = fused and len(ctx.inputs) > 7 and ctx.inputs[6] is not None  # rotate_half from cos/sin [b, s, d]
    rot = {"cos": ctx.gpu(ctx.inputs[6]), "sin": ctx.gpu(ctx.inputs[7])} if rotary else {}
    if fused:
        _, s, hq, d = q.shape
    else:
        _, hq, s, d = q.shape
    row_heads = hq
    if packed:
        hq = int(ctx.attr("q_heads", 0))
    hkv, cap = kc.capacity[1], kc.capacity[2]
    if not all(isinstance(x, int) for x in (hq, hkv, d, cap)) or d % 4 or not hq or hq % hkv:
        raise ctx.unsupported("head counts and head size must be fixed, head size a multiple of 4")
    if packed and (not fused or row_heads != hq + 2 * hkv):
        raise ctx.unsupported(f"a packed q|k|v input needs [b, s, {hq + 2 * hkv}, d] rows, not {q.shape}")
    # where the heads of q, k and v start in their rows (`fused` layouts: cached_attention.wgsl.j2)
    rows = dict(qs=row_heads, ks=row_heads, ko=hq, vo=hq + hkv) if packed else dict(qs=hq, ks=hkv, ko=0, vo=0)
    past = kc.shape[2]
    total = D.add(past, s)
    params = {"s": s, "past": past, "n": D.mul(hkv * d, s)}
    # the gpu-f16 class keeps its KV cache in f16 (half the bytes each decode step streams)
    f16_cache = ["kc", "vc"] if ctx.kclass.use_f16 and ctx.kclass.attention == "flash" else []
    serial = ctx.kclass.attention == "serial"
    decode_when, prefill_when = row_steps(s)
    # The software class's decode step writes its own keys/values (kind "decode") where its bindings stay within
    # WebGPU's 8 storage buffers: q|k|v packed in one tensor, or no rotary inputs.
    write_in_decode = serial and decode_when != "skip" and (packed or not rotary)
    write_when = prefill_when if write_in_decode else None
    if write_when != "skip":
        ctx.dispatch("cached_attention.wgsl.j2", {"kn": ctx.gpu(k_new), "vn": ctx.gpu(v_new), **rot},
                     {"kc": kc, "vc": vc}, work=params["n"], params=params, kind="write", d=d, cap=cap, hkv=hkv,
                     fused=fused, rotary=rotary, f16_vars=f16_cache, when=write_when, **rows)
    out = ctx.output(0, q.dtype, (q.shape[0], s, hq, d) if fused else q.shape)
    tm = mask.shape[-1]
    _, mh, ms, _ = broadcast_strides(mask.shape, (1, hq, s, tm))
    pairs = D.mul(hq, s)
    params = {"s": s, "t": total, "tm": tm, "mh": mh, "ms": ms, "pairs": pairs}
    reads = {"q": ctx.gpu(q), "kc": kc, "vc": vc, "mask": ctx.gpu(mask), **rot}
    limit = float(ctx.attr("softcap", 0.0))  # Gemma 2: scores -> limit * tanh(scores / limit) before the mask
    softcap = wgsl_literal(limit, "f32") if limit > 0 else None
    # The class's kernel: "serial" (one invocation per query row and head, registers only) or "workgroup" (a
    # workgroup per row, keys split across invocations, reductions in workgroup memory). Software GPUs pay
    # dearly for barriers.
    if serial:
        common = dict(d=d, cap=cap, group=hq // hkv, hq=hq, fused=fused, rotary=rotary, **rows,
                      bool_mask=mask.dtype == "bool", softcap=softcap,
                      scale=wgsl_literal(float(ctx.attr("scale", 1.0)), "f32"))
        if decode_when != "skip":
            new_rows = ({} if packed else {"kn": ctx.gpu(k_new), "vn": ctx.gpu(v_new)}) if write_in_decode else None
            _serial_decode(ctx, reads, out, {**params, "past": past}, decode_when, common, new_rows, packed)
        if prefill_when != "skip":  # serial_rows query rows per invocation
            block = serial_rows(d)
            n = D.mul(hq, D.ceildiv(s, block))
            u = head_unroll(d // 4, cap)
            sharing = serial_sharing(ctx, FEW_ROWS_WG, d)
            # a build for generation whose lanes share K/V loads (software-subgroups; without, 8 rows one a
            # lane loaded each K/V row 8 times: lavapipe, software class, 40 ms a step against 30)
            if decode_when != "skip" and sharing["sg"]:
                few = D.mul(hq, s)
                few = only_when(few, D.add(FEW_ROWS + 1, D.mul(s, -1)))
                ctx.dispatch("cached_attention.wgsl.j2", reads, {"out": out}, work=few, params={**params, "pairs": few},
                             wg=FEW_ROWS_WG, when=prefill_when, kind="serial", rows=1, vec4_vars=["kc", "vc"], uq=u,
                             uv=u, **sharing, **common)
                n = only_when(n, D.add(s, -FEW_ROWS))
            ctx.dispatch("cached_attention.wgsl.j2", reads, {"out": out}, work=n, params={**params, "pairs": n},
                         wg=SERIAL_WG, when=prefill_when, kind="serial", rows=block, vec4_vars=["kc", "vc"], uq=u,
                         uv=u, **serial_sharing(ctx, SERIAL_WG, d), **common)
        return
    if ctx.kclass.attention == "flash":
        _flash(ctx, reads, out, params, mask, d=d, cap=cap, hq=hq, group=hq // hkv, fused=fused, rotary=rotary,
               softcap=softcap, **rows)
        return
    grid = (D.dmin(pairs, 65535), D.ceildiv(pairs, 65535), 1)
    ctx.dispatch("cached_attention.wgsl.j2", reads, {"out": out}, grid=grid, params=params, wg=WG, kind="attend", d=d,
                 cap=cap, group=hq // hkv, hq=hq, fused=fused, rotary=rotary, **rows,
                 chunk=CHUNK, dpt=(d + WG - 1) // WG, bool_mask=mask.dtype == "bool", vec4_vars=["kc"],
                 softcap=softcap,
                 scale=wgsl_literal(float(ctx.attr("scale", 1.0)), "f32"))


def serial_sharing(ctx, wg: int, *head_dims: int) -> dict:
    """software-subgroups: the serial attention kernels' invocations on one head share each K/V row
    (_serial_rows.wgsl.j2 ``sg``), a vec4 a lane of 8, so for head dims that are multiples of 32."""
    sg = 8 if ctx.kclass.subgroup_lanes == 8 and wg % 8 == 0 and all(d % 32 == 0 for d in head_dims) else 0
    return {"sg": sg, "subgroups": bool(sg), "subgroup_branches": bool(sg)}


def decode_lanes(d: int, limits: dict) -> int:
    """Invocations of the software class's decode workgroup (cached_attention.wgsl.j2 "decode"): DECODE_WG, halved
    until their partials (d + 4 floats each) fit in workgroup memory."""
    lanes = DECODE_WG
    while lanes > 1 and lanes * (d + 4) * 4 > limits["max_workgroup_bytes"]:
        lanes //= 2
    return lanes


def _serial_decode(ctx, reads: dict, out, params: dict, when, common: dict, new_rows: dict | None,
                   packed: bool) -> None:
    """The software class's decode step in one dispatch (cached_attention.wgsl.j2 "decode"): a workgroup per
    (query head, row), its decode_lanes invocations splitting the keys (one invocation per head would leave a
    decode row's keys to one of the device's threads) and merging through workgroup memory. ``new_rows``
    (this step's k_new/v_new reads, empty when packed in q): the kernel also writes them into the caches, so
    the step is one dispatch instead of three (write, split, merge: ~300 us a layer on lavapipe, mostly
    dispatch cost)."""
    write = new_rows is not None
    states = {name: reads[name] for name in ("kc", "vc")}  # bound read-write when the step writes them
    reads = {name: t for name, t in reads.items() if not (write and name in states)}
    writes = {"out": out, **(states if write else {})}
    lanes = decode_lanes(common["d"], ctx.limits)
    u = head_unroll(common["d"] // 4, D.ceildiv(common["cap"], lanes))
    ctx.dispatch("cached_attention.wgsl.j2", {**reads, **(new_rows or {})}, writes, grid=grid_2d(params["pairs"]),
                 wg=lanes, when=when, params=params, kind="decode", write_new=write, packed=packed,
                 vec4_vars=["kc", "vc"], uq=u, uv=u, **common)


def _flash(ctx, reads: dict, out, params: dict, mask, **common) -> None:
    """The GPU class: a flash-attention step for prefill (several query rows) and a split-K step plus a
    merge for decode (one row), each under its ``when`` condition on the row count."""
    s, total, hq, d = params["s"], params["t"], common["hq"], common["d"]
    decode_when, prefill_when = row_steps(s)
    attrs = dict(bool_mask=mask.dtype == "bool", scale=wgsl_literal(float(ctx.attr("scale", 1.0)), "f32"), **common)
    f16 = ctx.kclass.use_f16
    cache = dict(f16=f16, f16_vars=["kc", "vc"] if f16 else [])
    if prefill_when != "skip":
        bk = max(1, min(16, FLASH_TILE_FLOATS * (2 if f16 else 1) // d))
        grid = (D.ceildiv(s, FLASH_BQ), hq, 1)
        u = head_unroll(d // 4, common["cap"])
        ctx.dispatch("cached_flash.wgsl.j2", reads, {"out": out}, grid=grid, params=params, wg=FLASH_BQ,
                     when=prefill_when, kind="flash", bq=FLASH_BQ, bk=bk, vec4_vars=["kc", "vc"], uk=u, uv=u, **cache,
                     **attrs)
    if decode_when != "skip":
        nblk = D.ceildiv(total, SPLIT_CHUNK)
        part = ctx.temp("float32", (hq, nblk, d + 2))  # one row: pairs == hq, whatever a prefill's row count
        split_params = {**params, "nblk": nblk}
        ctx.dispatch("cached_flash.wgsl.j2", reads, {"part": part}, grid=(nblk, params["pairs"], 1),
                     params=split_params, wg=WG, when=decode_when, kind="split", chunk=SPLIT_CHUNK,
                     subgroups=ctx.kclass.use_subgroups, vec4_vars=["kc"], **cache, **attrs)
        n = D.mul(params["pairs"], d)
        ctx.dispatch("cached_flash.wgsl.j2", {"part": part}, {"out": out}, work=n, wg=WG, when=decode_when,
                     params={"s": s, "nblk": nblk, "n": n}, kind="merge", **attrs)
