"""Matmuls against constant weights, decode-shaped and quantized: ``webinfer.MatMulQ`` / ``webinfer.GatherQ``
(written by graph/quantize.py) and MatMul's one-row path for a plain f32 weight.

A decode step multiplies one row by each weight: the work is streaming the weight once, so the matrix-
vector kernel (GEMV) gives each invocation one output column and walks its contiguous N-major words,
while the prefill kernel (GEMM) keeps a tile of rows x columns in registers (the class's ``quant_gemm``)
to reuse each loaded word. When the row count is symbolic both steps are emitted with ``when`` conditions on
it, so one artifact runs prefill (rows > 1) and decode (rows == 1). Weights stay packed in GPU memory.
"""

from __future__ import annotations

from ... import dims as D
from ...format.textures import texture_size
from ...opschema import PER_WORD
from ..registry import WEBINFER_DOMAIN, lowering
from ..split import row_parts
from . import norm
from .loop_limit import check_loop
from .movement import Axis, remap
from .quant_rows import FEW_ROWS_FORMATS, few_rows_step, only_when
from .reduce import literal
from .tiles import choose_tiling, grid_2d, row_steps, tiled_matmul

# Measured on lavapipe (576x1536, int4): 4 columns per invocation 1.36 GB of weights per CPU-second,
# 2 columns 1.07, 1 column 0.81 (x is loaded once for all 4), then with 64 invocations per workgroup. 4-bit weights
# take 8 columns (benchmarks/gemv_bandwidth.py, GB of weights per CPU-second, same run, two rounds: 576x49152
# 1.26 -> 1.35, 576x1536 1.88-2.18 -> 2.21-2.37, 1536x576 2.21 -> 2.41); 8-bit ones keep 4 (576x1536: 2.9
# with 4, 2.8-2.9 with 8).
AFFINE_FORMATS = ("int4", "nbits4", "nbits8")  # block parameters (scale, minimum) pairs in qp
PLAIN_FORMATS = ("f32", "f16")  # float weights, no blocks: read a vec4 of K at a time
# 8 invocations per workgroup (one SIMD group of llvmpipe's): a 576x192 int4 GEMV is 24 invocations, which one
# workgroup of 64 ran on one of the two cores' threads. SmolLM2-135M int4 decode, software class, same process,
# alternating: 13.2 -> 16.8-17.8 tok/s median (64 -> 8); 4: 13.0; 16: 15.5; int8 14.4 -> 15.6; fp32 unchanged.
GEMV_WG = 8
GEMV_TN = 4
GEMV_TN_4BIT = 8
GEMV_TN_PAIRED = 8  # int4 columns of each of a paired GEMV's two weights an invocation takes
# int4 on int8 activations (_q8_gemv): 16 columns per invocation (the block's x words loaded once for 16;
# 576x49152 per CPU-second: 8 columns 12.3-12.5 ms, 16 8.4-10.4, 32 12.1-12.9).
GEMV_TN_Q8 = 16
# Real GPUs (llama.cpp's mul_mat_vec, onnxruntime's MatMulNBits): a workgroup of 64 streams one weight row
# for 4 output columns and reduces across its invocations. K-major f32 weights: 8 x 32 (vec4 columns x
# k-groups): 32 columns and 32 k-streams per workgroup, so a 576-wide output still spreads over 18 workgroups.
GPU_GEMV_WG, GPU_GEMV_TN = 64, 4
GPU_GEMV_KN = (8, 32)


def _weight_reads(ctx, suffix: str = "") -> dict:
    """MatMulQ's words, block parameters and bias (inputs 1-3) as wq, qp, bias (+ ``suffix``)."""
    reads = {"wq" + suffix: ctx.inputs[1]}
    if ctx.has_input(2):
        reads["qp" + suffix] = ctx.inputs[2]
    if ctx.has_input(3):
        reads["bias" + suffix] = ctx.inputs[3]
    return reads


def _common(ctx, reads: dict, epilogue_fn: str) -> dict:
    """The template context every packed matmul step shares."""
    fmt, k, n = ctx.attr("format"), int(ctx.attr("k")), int(ctx.attr("n"))
    plain = fmt in PLAIN_FORMATS
    xvec = k % (4 if plain else 32) == 0
    wvec = fmt == "f16" or (fmt == "f32" and k % 4 == 0)  # f16 rows are padded to whole vec4s
    qvec = not plain  # a block of 32 is 4 (int4) or 8 (int8) whole words: vec4<u32> loads
    vec4 = (["x"] if xvec else []) + (["wq"] if (wvec or qvec) and fmt != "f16" else [])
    # the affine formats' (scale, minimum) pairs as one vec2 load each (lavapipe: int4 576x49152 GEMV on int8
    # activations 5.5 -> 4.6 ms, same process); f16 words two at a time (4 values)
    vec2 = ["qp"] if fmt in AFFINE_FORMATS and ctx.has_input(2) else ["wq"] if fmt == "f16" else []
    return dict(fmt=fmt, K=k, N=n, per_word=PER_WORD[fmt], xvec=xvec, wvec=wvec, vec4_vars=vec4, vec2_vars=vec2,
                has_bias=ctx.has_input(3), qvec=qvec, epilogue_fn=epilogue_fn, shifts=ctx.kclass.unpack_by_shifts,
                texture_vars=weight_textures(ctx, fmt, reads), **nbits_layout(ctx, fmt, k))


@lowering("MatMulQ", domain=WEBINFER_DOMAIN)
def lower_matmul_q(ctx, epilogue_fn: str = "", extra_reads: dict | None = None,
                   steps: tuple = ("gemv", "gemm")) -> None:
    """``epilogue_fn``/``extra_reads``: a fused epilogue ``epi(base, row, col, idx)`` (kernels/fused.py).
    Input 4 with ``norm_epsilon``: an RMSNorm of x absorbed by graph/passes/absorb_norms.py. ``steps``: the
    decode (``gemv``) and prefill (``gemm``) steps to emit (a paired matmul emits its own GEMV)."""
    x = ctx.inputs[0]
    fmt, k, n = ctx.attr("format"), int(ctx.attr("k")), int(ctx.attr("n"))
    if x.shape[-1] != k and isinstance(x.shape[-1], int):
        raise ctx.unsupported(f"input has {x.shape[-1]} columns, the weight {k} rows")
    out = ctx.output(0, "float32", tuple(x.shape[:-1]) + (n,))
    parts = row_parts(ctx, [ctx.inputs[i] if ctx.has_input(i) else None for i in (1, 2, 3)])
    if parts is not None:
        if extra_reads:  # (an epilogue of constants alone, e.g. a logit soft-cap, is the same on every part)
            raise ctx.unsupported("a fused epilogue reading other tensors on a weight larger than one binding")
        return _split_n(ctx, parts, out, steps, epilogue_fn)
    rows = D.product(x.shape[:-1])
    reads = {"x": x, **_weight_reads(ctx)}
    reads.update({name: ctx.gpu(t) for name, t in (extra_reads or {}).items()})
    common = _common(ctx, reads, epilogue_fn)
    wvec, layout = common["wvec"], nbits_layout(ctx, fmt, k)
    gemv_when, gemm_when = (w if s in steps else "skip" for w, s in zip(row_steps(rows, ctx), ("gemv", "gemm")))
    tiled = choose_tiling(rows, n, True, ctx.kclass).shared
    if gemv_when != "skip":
        _gemv_step(ctx, reads, out, gemv_when, common)
    if gemm_when != "skip" and tiled:
        _tiled_gemm(ctx, _normalized(ctx, reads, gemm_when), out, rows, n, k, gemm_when, fmt, wvec, epilogue_fn, layout)
    elif gemm_when != "skip":
        t = ctx.kclass.quant_gemm
        grid = (D.ceildiv(n, t.tn * t.wx), D.ceildiv(rows, t.tm * t.wy), 1)
        if gemm_when is not None and fmt in FEW_ROWS_FORMATS:  # (a build for generation, rows symbolic)
            past_few = few_rows_step(ctx, _normalized(ctx, reads, gemm_when), out, rows, gemm_when, common,
                                     _sizes(k, n, {}), _shares_x(ctx, fmt, GEMV_WG))
            grid = (grid[0], only_when(grid[1], past_few), 1)
        ctx.dispatch("quant_matmul.wgsl.j2", _normalized(ctx, reads, gemm_when), {"out": out}, grid=grid, wg=t.wx * t.wy,
                     when=gemm_when, params={"M": rows, **_sizes(k, n, layout)}, kind="gemm", t=t,
                     sgx=_shares_x(ctx, fmt, t.wx), few_rows=not isinstance(rows, int), **common)


def _split_n(ctx, parts: list, out, steps: tuple, epilogue_fn: str) -> None:
    """A weight over one binding (a tied LM head): each part of its N-major rows computes its columns of the
    logits in a temporary (every step the whole weight would have), copied into its columns of ``out``."""
    x = ctx.inputs[0]
    outer = D.product(x.shape[:-1])
    norm_scale = ctx.inputs[4] if ctx.has_input(4) else None
    for lo, hi, (wq, qp, bias) in parts:
        part = ctx.temp("float32", tuple(x.shape[:-1]) + (hi - lo,))
        lower_matmul_q(_Operands(ctx, [x, wq, qp, bias, norm_scale], part, {"n": hi - lo}), epilogue_fn,
                       steps=steps)
        remap(ctx, part, out, [Axis(outer, hi - lo, dst=out.shape[-1]), Axis(hi - lo, 1, dst=1)], dst_base=lo)


def _gemv_step(ctx, reads: dict, out, when, common: dict, paired: bool = False) -> None:
    """The decode step (one row): the GPU classes' workgroup GEMV, the software class's int8-activation GEMV,
    or its plain one. ``paired``: reads hold a partner's weights too (not the int8-activation GEMV's)."""
    fmt, k, n = common["fmt"], common["K"], common["N"]
    rows = D.product(ctx.inputs[0].shape[:-1])
    int8 = ctx.kclass.int8_activations(fmt)  # (x is quantized first: the norm runs before that pass)
    if choose_tiling(rows, n, True, ctx.kclass).shared:
        eps = None if int8 or not ctx.has_input(4) else ctx.attr("norm_epsilon")
        _gpu_gemv(ctx, _normalized(ctx, reads, when) if int8 else reads, out, when, fmt, k, n, common["wvec"],
                  common["epilogue_fn"], nbits_layout(ctx, fmt, k), eps, paired)
    elif int8:
        _q8_gemv(ctx, _normalized(ctx, reads, when), out, when, k, n, common)
    else:
        _software_gemv(ctx, reads, out, when, common, paired)


def _normalized(ctx, reads: dict, when) -> dict:
    """``reads`` with x normalized by the absorbed RMSNorm (input 4) in a kernel of its own (run when ``when``)."""
    if not ctx.has_input(4):
        return reads
    return {**reads, "x": norm.rms_rows(ctx, ctx.inputs[0], ctx.inputs[4], ctx.attr("norm_epsilon"), when)}


def _software_gemv(ctx, reads: dict, out, when, common: dict, paired: bool = False) -> None:
    """The software class's decode GEMV (quant_matmul.wgsl.j2 ``gemv``): an invocation per ``tn`` columns.
    ``paired``: reads hold a partner's weights too (wq2, qp2, bias2) and the invocation computes its columns
    of both, for an ``epi(base, base2, ...)`` epilogue."""
    fmt, k, n = common["fmt"], common["K"], common["N"]
    eps = ctx.attr("norm_epsilon") if ctx.has_input(4) else None
    tn = (GEMV_TN_PAIRED if paired else GEMV_TN_4BIT) if fmt in ("int4", "nbits4") else GEMV_TN
    # the norm in the GEMV's own loads (x * scale, sum of x^2) and stores (* r); an f32 weight's K % 4 tail
    # loads x once per column, so that one normalizes first
    prologue = eps is not None and (fmt != "f32" or k % 4 == 0)
    gemv_reads = {**reads, "ns": ctx.inputs[4]} if prologue else _normalized(ctx, reads, when)
    extra4 = (["ns"] if prologue and common["xvec"] else []) + (["wq2"] if paired and "wq" in common["vec4_vars"] else [])
    extra2 = ["qp2"] if paired and "qp" in common["vec2_vars"] else []
    ctx.dispatch("quant_matmul.wgsl.j2", gemv_reads, {"out": out}, work=D.ceildiv(n, tn), wg=GEMV_WG,
                 when=when, params=_sizes(k, n, nbits_layout(ctx, fmt, k)), kind="gemv", tn=tn, paired=paired,
                 sgx=_shares_x(ctx, fmt, GEMV_WG), norm_eps=literal(eps) if prologue else "",
                 **{**common, "vec4_vars": common["vec4_vars"] + extra4, "vec2_vars": common["vec2_vars"] + extra2})


# -- paired matmuls (graph/passes/pair_matmuls.py): x, words, params, bias, norm scale, the partner's words,
# params and bias, then the program's extras
PAIRED_INPUTS = 8


class _Operands:
    """A lowering context with other inputs whose output 0 is a given tensor: the partner's MatMulQ."""

    def __init__(self, ctx, inputs: list, out, attrs: dict | None = None):
        self._ctx, self.inputs, self._out, self._attrs = ctx, inputs, out, attrs or {}

    def __getattr__(self, name):
        return getattr(self._ctx, name)

    def attr(self, name: str, default=None):
        return self._attrs[name] if name in self._attrs else self._ctx.attr(name, default)

    def has_input(self, i: int) -> bool:
        return i < len(self.inputs) and self.inputs[i] is not None

    def output(self, i: int, dtype: str, shape):
        return self._out


def pairs_gemv(ctx) -> bool:
    """Whether the decode step of a paired matmul runs as one paired GEMV: the software class's plain GEMV
    and the GPU classes' (the software class's int8-activation GEMV computes the two matmuls apart)."""
    x, fmt, n = ctx.inputs[0], ctx.attr("format"), int(ctx.attr("n"))
    rows = D.product(x.shape[:-1])
    gemv_when, _ = row_steps(rows, ctx)
    return gemv_when != "skip" and (choose_tiling(rows, n, True, ctx.kclass).shared
                                    or not ctx.kclass.int8_activations(fmt))


def partner_result(ctx, inputs: list, steps: tuple):
    """The partner matmul's result for ``steps`` in a temporary; None when none of those steps ever runs."""
    x = ctx.inputs[0]
    rows = D.product(x.shape[:-1])
    if all(w == "skip" for w, s in zip(row_steps(rows, ctx), ("gemv", "gemm")) if s in steps):
        return None
    out = ctx.temp("float32", tuple(x.shape[:-1]) + (int(ctx.attr("n")),))
    lower_matmul_q(_Operands(ctx, inputs, out), steps=steps)
    return out


def paired_gemv(ctx, partner_inputs: list, epilogue_fn: str, extra_reads: dict) -> None:
    """The paired decode GEMV: both matmuls' columns from one pass over x, the program on both."""
    x = ctx.inputs[0]
    partner = _Operands(ctx, partner_inputs, None)
    reads = {"x": x, **_weight_reads(ctx), **_weight_reads(partner, "2"),
             **{name: ctx.gpu(t) for name, t in extra_reads.items()}}
    common = _common(ctx, reads, epilogue_fn)
    textures = weight_textures(partner, common["fmt"], _weight_reads(partner))
    if bool(textures) != bool(common["texture_vars"]):
        raise ctx.unsupported("the paired weights differ in their texture layout")
    common["texture_vars"] = {**common["texture_vars"], **{name + "2": f for name, f in textures.items()}}
    common["has_bias2"] = partner.has_input(3)
    _gemv_step(ctx, reads, ctx.outputs[0], row_steps(D.product(x.shape[:-1]), ctx)[0], common, paired=True)


# The packed formats' weights as textures (the class's weight_textures): words 4 to a texel, (scale, minimum)
# pairs or scales one to a texel. Only graph/quantize.py's formats: their tensors feed MatMulQ/GatherQ alone,
# so every step of a program reads them the same way (serialize.py checks it).
TEXTURE_FORMATS = {"int4": {"wq": "rgba32uint", "qp": "rg32float"}, "int8": {"wq": "rgba32uint", "qp": "r32float"}}


def weight_textures(ctx, fmt: str, reads: dict) -> dict:
    """Which of ``reads`` (wq, qp) the kernel reads as textures, and their formats (format/textures.py)."""
    if not ctx.kclass.weight_textures or fmt not in TEXTURE_FORMATS:
        return {}
    chosen = {}
    for name, texel_format in TEXTURE_FORMATS[fmt].items():
        t = reads.get(name)
        if t is None or not t.is_const or t.alias is not None or not isinstance(t.numel, int):
            return {}
        if texture_size(4 * t.numel, texel_format) is None:
            return {}  # past 8192 x 8192 texels: both stay buffers
        chosen[name] = texel_format
    return chosen


def _shares_x(ctx, fmt: str, lanes_per_row: int) -> bool:
    """Whether the packed GEMV/GEMM loads x by subgroup broadcast (quant_matmul.wgsl.j2 ``sgx``): a block of x
    is 8 vec4s, one a lane of a subgroup of 8 (the class's subgroup_lanes) whose lanes share x's rows."""
    return fmt not in PLAIN_FORMATS and ctx.kclass.subgroup_lanes == 8 and lanes_per_row % 8 == 0


def _sizes(k: int, n: int, layout: dict, rows: int | None = None) -> dict:
    """The sizes quant_matmul.wgsl.j2 reads as params (uniforms: one shader for every K and N); the block
    size QB and K % 4 stay in the code."""
    sizes = {"K": k, "N": n, "NB": -(-k // 32), "KP": -(-k // 4) * 4}
    sizes.update({name: layout[name] for name in ("NBQ", "RW") if name in layout})
    if rows is not None:
        sizes["V"] = rows
    return sizes


def _quantize_x(ctx, reads: dict, k: int, when, pairs: bool = False) -> dict:
    """A first pass that turns x into int8 blocks of 32 (xq) with their scale and exact sum (xs): ``reads``
    with them in place of x. ``pairs``: the software class's layout (16 words a block), else dp4a's (8)."""
    nb = -(-k // 32)

    def make():
        xq, xs = ctx.temp("uint32", (nb * (16 if pairs else 8),)), ctx.temp("float32", (nb * 2,))
        ctx.dispatch("gemv.wgsl.j2", {"x": reads["x"]}, {"xq": xq, "xs": xs}, work=nb, wg=64, kind="quantize_x",
                     when=when, xvec=k % 4 == 0, params={"K": k, "NB": nb}, pairs=pairs,
                     vec4_vars=(["x"] if k % 4 == 0 else []) + (["xq"] if pairs else []))
        return xq, xs

    # GEMVs reading the same x (q/k/v, gate/up projections) share one pass
    xq, xs = ctx.shared(("quantize_x", reads["x"].id, k, pairs, repr(when)), make)
    return {"xq": xq, "xs": xs, **{name: t for name, t in reads.items() if name != "x"}}


def _q8_gemv(ctx, reads: dict, out, when, k: int, n: int, common: dict) -> None:
    """The software class's int4 decode GEMV on int8 activations (quant_matmul.wgsl.j2 ``q8``): the integer
    products take a third of the f32 unpacking's instructions, leaving the weight loads as the cost."""
    reads = _quantize_x(ctx, reads, k, when, pairs=True)
    tn = GEMV_TN_Q8
    ctx.dispatch("quant_matmul.wgsl.j2", reads, {"out": out}, work=D.ceildiv(n, tn), wg=GEMV_WG, when=when,
                 params=_sizes(k, n, {}), kind="gemv", tn=tn, q8=True, **{**common, "vec4_vars": ["xq", "wq"]})


def _gpu_gemv(ctx, reads: dict, out, when, fmt: str, k: int, n: int, wvec: bool, epilogue_fn: str,
              layout: dict, eps: float | None = None, paired: bool = False) -> None:
    """The GPU class's decode GEMV (gemv.wgsl.j2 'nk'). With the class's dp4a knob and int8/int4 weights, a
    first pass quantizes x to int8 blocks and the GEMV takes packed integer dot products. ``eps``: an absorbed
    RMSNorm (input 4 its scale) normalizes x in the GEMV's loads. ``paired``: reads hold a partner's weights
    too (wq2, qp2, bias2), for an ``epi(base, base2, ...)`` epilogue."""
    nb = -(-k // 32)
    wpr = {"f32": -(-k // 4), "f16": -(-k // 4), "int8": nb * 8, "int4": nb * 4}.get(fmt, layout.get("RW", 0))
    sizes = {"K": k, "N": n, "NB": nb, "WPR": wpr, **({"NBQ": layout["NBQ"]} if "NBQ" in layout else {})}
    common = dict(when=when, fmt=fmt, xvec=k % 4 == 0, params=sizes)
    if ctx.kclass.int8_activations(fmt):
        reads = _quantize_x(ctx, reads, k, when)
    weights = ["wq"] + (["wq2"] if paired else []) if wvec else []
    vec4 = (["x"] if k % 4 == 0 and "x" in reads else []) + (weights if fmt != "f16" else [])
    if eps is not None:
        reads = {**reads, "ns": ctx.inputs[4]}
        vec4 += ["ns"] if k % 4 == 0 else []
        common["norm_eps"] = literal(eps)
    ctx.dispatch("gemv.wgsl.j2", reads, {"out": out}, grid=grid_2d(D.ceildiv(n, GPU_GEMV_TN)), wg=GPU_GEMV_WG,
                 kind="nk", tn=GPU_GEMV_TN, wvec=wvec, vec4_vars=vec4, vec2_vars=weights if fmt == "f16" else [],
                 has_bias="bias" in reads,
                 paired=paired, has_bias2="bias2" in reads,
                 epilogue_fn=epilogue_fn, subgroups=ctx.kclass.use_subgroups, dp4a="xq" in reads, **common,
                 **layout)


def nbits_layout(ctx, fmt: str, k: int) -> dict:
    """onnxruntime's MatMulNBits layouts (graph/contrib/quant.py): block parameters every QB values (NBQ per
    row), rows of RW words (K padded to whole blocks). Our own formats need none of this."""
    if fmt not in ("nbits4", "nbits8"):
        return {}
    qb = int(ctx.attr("block"))
    nbq = -(-k // qb)
    return {"QB": qb, "NBQ": nbq, "RW": nbq * qb // PER_WORD[fmt]}


def _tiled_gemm(ctx, reads: dict, out, rows, n: int, k: int, when, fmt: str, wvec: bool, epilogue_fn: str,
                layout: dict) -> None:
    """The prefill step on the workgroup-tiled matmul kernel: x tiles and dequantized weight tiles in
    workgroup memory (real GPUs); the weights stay packed in GPU memory."""
    t = choose_tiling(rows, n, True, ctx.kclass)
    reads = dict(reads)
    has_bias = "bias" in reads
    if has_bias:
        reads["c"] = reads.pop("bias")
    epilogue = "acc + cval(row, col)" if has_bias else "acc"
    if epilogue_fn:
        epilogue = f"epi({epilogue}, row, col, idx)"
    a_vec = k % 4 == 0
    params = {"M": rows, "N": n, "K": k, "MN": D.mul(rows, n), "sam": k, "sak": 1, "scm": 0, "scn": 1,
              **({"KP": -(-k // 4) * 4} if fmt == "f16" else {})}
    tiled_matmul(ctx, {"a": reads.pop("x"), **reads}, out, t, (rows, n, 1), params, when=when, brank=0, ct="f32",
                 epilogue=epilogue,
                 epilogue_fn=epilogue_fn, has_c=has_bias, zero={}, a_src="vec" if a_vec else "strided",
                 b_src="q", fmt=fmt, wvec=wvec, vec4_vars=(["a"] if a_vec else []) + (["wq"] if wvec and fmt != "f16" else []),
                 vec2_vars=["wq"] if fmt == "f16" else [],
                 **layout)


@lowering("GatherQ", domain=WEBINFER_DOMAIN)
def lower_gather_q(ctx) -> None:
    words, idx = ctx.inputs[0], ctx.inputs[2]
    fmt, k = ctx.attr("format"), int(ctx.attr("k"))
    out = ctx.output(0, "float32", tuple(idx.shape) + (k,))
    total = out.numel
    if total == 0:
        return
    qp = ctx.inputs[1] if ctx.has_input(1) else None
    layout = nbits_layout(ctx, fmt, k)
    rows = int(words.shape[0])
    parts = row_parts(ctx, [words, qp])
    # a table over one binding: each part's dispatch writes the rows it holds (codegen/split.py)
    for lo, hi, (wq, qpp) in parts or [(0, rows, (words, qp))]:
        reads = {"wq": wq, "idx": idx, **({"qp": qpp} if qpp is not None else {})}
        extra = {"VT": rows, "LO": lo} if parts else {}
        ctx.dispatch("quant_matmul.wgsl.j2", reads, {"out": out}, work=total,
                     params={"total": total, **_sizes(k, 0, layout, hi - lo), **extra},
                     kind="gather", fmt=fmt, K=k, V=hi - lo, per_word=PER_WORD[fmt], part=bool(parts),
                     texture_vars=weight_textures(ctx, fmt, reads), **layout)


def gemv_kn(ctx, x, w, out, when, epilogue_fn: str = "", extra_reads: dict | None = None) -> None:
    """MatMul's decode step for a plain f32 constant weight stored K-major [K, N] (``x`` has one row).

    ``epilogue_fn``/``extra_reads``: a fused epilogue ``epi(base, row, col, idx)`` (see kernels/fused.py)
    applied to each output before it is stored."""
    k, n = (int(d) for d in w.shape)
    wvec = n % 4 == 0
    reads = {"x": x, "wq": w, **{name: ctx.gpu(t) for name, t in (extra_reads or {}).items()}}
    if choose_tiling(1, n, True, ctx.kclass).shared:
        kx, ky = GPU_GEMV_KN
        ctx.dispatch("gemv.wgsl.j2", reads, {"out": out}, grid=grid_2d(D.ceildiv(n // 4 if wvec else n, kx)),
                     wg=kx * ky, when=when, kind="kn", kx=kx, ky=ky, K=k, N=n, wvec=wvec,
                     vec4_vars=["wq"] if wvec else [], epilogue_fn=epilogue_fn)
        return
    check_loop(ctx, k, "the inner dimension K")
    ctx.dispatch("quant_matmul.wgsl.j2", reads, {"out": out}, work=n // 4 if wvec else n, params=_sizes(k, n, {}),
                 wg=GEMV_WG, when=when, kind="gemv_kn", fmt="f32", K=k, N=n, per_word=1, wvec=wvec,
                 vec4_vars=["wq"] if wvec else [], epilogue_fn=epilogue_fn)
