"""Conv (1-D/2-D/3-D, groups, dilations, auto_pad), ConvInteger, QLinearConv and BatchNormalization.

Conv is a direct convolution, rank-generic: each invocation computes ``tc`` output channels x ``tp`` output
positions in registers (the kernel class's ``conv_block``), looping over the input channels of its group and
the kernel window. Constant weights are re-laid out at build time as ``[Cin/group * K, Cout]`` so one
invocation's channels are adjacent. The GPU class runs groups of many channels as an implicit GEMM instead:
the tiled matmul kernel reading the input through the window (``_conv_gemm``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import dims as D
from ... import shape_ops
from ...options import SYMBOLIC_DIM_GUESS
from ..emit import wgsl_literal
from ..registry import lowering
from .elementwise import elementwise
from .helpers import compute_type
from .loop_limit import check_loop, nested
from .matmul import Operand, matmul, requantize
from .reduce import row_kernel, sum_stat
from .tiles import choose_tiling, grid_2d, tiled_matmul

WG = 64
# GPU class: implicit GEMM from this many output channels per group and k (input channels x window) on.
GPU_GEMM_MIN_COUT, GPU_GEMM_MIN_K = 16, 8


@dataclass
class Window:
    """Sliding-window geometry over the spatial dims, shared by conv and pooling."""

    kernel: list
    strides: list
    dilations: list
    pads: list  # begin pads, per spatial dim
    out: list  # output spatial sizes
    ends: list  # end pads (the padded extent; pooling's count_include_pad counts up to it)


def _steps(ctx, r: int) -> tuple[list[int], list[int]]:
    """The node's strides and dilations, each at least 1 (the windows are divided by them, and the row kernel
    writes them into its shader)."""
    strides = [int(s) for s in ctx.attr("strides", [1] * r)]
    dil = [int(d) for d in ctx.attr("dilations", [1] * r)]
    if min(strides + dil, default=1) < 1:
        raise ctx.unsupported(f"strides {strides} / dilations {dil}: each must be at least 1")
    return strides, dil


def window(ctx, in_spatial, kernel, ceil_mode: bool = False) -> Window:
    """Output sizes and begin pads from the node's attributes (ONNX's Conv/Pool formulas)."""
    r = len(in_spatial)
    strides, dil = _steps(ctx, r)
    pads = [int(p) for p in ctx.attr("pads", [0] * (2 * r))]
    auto = ctx.attr("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    begin, out, ends = [], [], []
    for i in range(r):
        o, pb, pe = shape_ops.window_axis(in_spatial[i], kernel[i], strides[i], dil[i], pads[i], pads[i + r], ceil_mode, auto)
        if not isinstance(o, int) and auto not in ("SAME_UPPER", "SAME_LOWER"):
            ctx.assume(D.add(o, -1), f"output size {D.to_text(o)} must be at least 1 (the input is smaller than the "
                                     f"kernel window)")
        begin.append(pb)
        ends.append(pe)
        out.append(o)
    return Window(list(kernel), strides, dil, begin, out, ends)


def window_params(w: Window, in_spatial) -> dict:
    params: dict = {}
    for i in range(len(w.kernel)):
        params.update({f"i{i}": in_spatial[i], f"o{i}": w.out[i], f"k{i}": w.kernel[i], f"s{i}": w.strides[i],
                       f"d{i}": w.dilations[i], f"pb{i}": w.pads[i], f"pe{i}": w.ends[i]})
    return params


def _channel_block(per_group: int, most: int = 4) -> int:
    """Output channels per invocation: the largest power of two up to ``most`` dividing the group's."""
    tc = most
    while per_group % tc:
        tc //= 2
    return tc


@dataclass
class ConvShape:
    group: int
    cin_g: int
    cout: int
    kernel: list

    @property
    def cout_g(self) -> int:
        return self.cout // self.group

    @property
    def ksize(self) -> int:
        return int(np.prod(self.kernel))


def conv_shape(ctx, w, transpose: bool) -> ConvShape:
    group = int(ctx.attr("group", 1))
    a, b = int(w.shape[0]), int(w.shape[1])
    kernel = [int(k) for k in w.shape[2:]]
    return ConvShape(group, a // group, b * group, kernel) if transpose else ConvShape(group, b, a, kernel)


def weight_layout(ctx, w, cs: ConvShape, transpose: bool):
    """Constant weights are re-laid out as [Cin/g * K, Cout]; others are read in ONNX's layout.
    Returns (tensor, strides for (input channel, kernel position, group, output column))."""
    k, ci, co, cog = cs.ksize, cs.cin_g, cs.cout, cs.cout_g
    if w.value is not None:
        v = w.value
        if transpose:
            wt = v.reshape(cs.group, ci, cog, k).transpose(1, 3, 0, 2).reshape(ci * k, co)
        else:
            wt = v.reshape(co, ci * k).T
        return _const(ctx, wt), (k * co, co, cog, 1)
    if transpose:
        return w, (cog * k, 1, ci * cog * k, k)
    return w, (k, 1, cog * ci * k, ci * k)


@lowering("Conv")
def lower_conv(ctx, **epilogue) -> None:
    x, w = ctx.inputs[0], ctx.inputs[1]
    cs = conv_shape(ctx, w, False)
    win = window(ctx, list(x.shape[2:]), cs.kernel)
    bias = ctx.inputs[2] if ctx.has_input(2) else None
    if _pointwise(cs, win):
        pointwise_conv(ctx, x, w, bias, cs, win, **epilogue)
        return
    conv(ctx, x, w, bias, x.dtype, win, cs, **epilogue)


def _pointwise(cs: ConvShape, win: Window) -> bool:
    return (cs.group == 1 and cs.ksize == 1 and all(s == 1 for s in win.strides)
            and all(p == 0 for p in win.pads + win.ends))


def pointwise_conv(ctx, x, w, bias, cs: ConvShape, win: Window, **epilogue) -> None:
    """A 1x1 conv is a matmul per image: out[n] = W[Cout, Cin] @ x[n][Cin, P] (+ bias per row)."""
    out = ctx.output(0, x.dtype, (x.shape[0], cs.cout) + tuple(win.out))
    npix = D.product(x.shape[2:])
    opw = Operand(w, cs.cin_g, 1)
    opx = Operand(x, npix, 1, (x.shape[0],), D.mul(cs.cin_g, npix))
    matmul(ctx, opw, opx, out, cs.cout, npix, cs.cin_g, c=(bias, 1, 0) if bias is not None else None, beta=1.0,
           **epilogue)


@lowering("ConvTranspose")
def lower_conv_transpose(ctx) -> None:
    x, w = ctx.inputs[0], ctx.inputs[1]
    cs = conv_shape(ctx, w, True)
    win = transpose_window(ctx, list(x.shape[2:]), cs.kernel)
    conv(ctx, x, w, ctx.inputs[2] if ctx.has_input(2) else None, x.dtype, win, cs, transpose=True)


def transpose_window(ctx, in_sp, kernel) -> Window:
    """ConvTranspose's output sizes and begin pads (ONNX spec: output_shape / output_padding / auto_pad)."""
    r = len(in_sp)
    strides, dil = _steps(ctx, r)
    opad = [int(p) for p in ctx.attr("output_padding", [0] * r)]
    pads = [int(p) for p in ctx.attr("pads", [0] * (2 * r))]
    auto = ctx.attr("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    shape = ctx.attr("output_shape")
    if shape is not None:
        shape = [int(v) for v in shape][-r:]
    begin, out = [], []
    for i in range(r):
        full = D.add(D.mul(D.add(in_sp[i], -1), strides[i]), opad[i] + (kernel[i] - 1) * dil[i] + 1)
        if shape is None and auto in ("SAME_UPPER", "SAME_LOWER"):
            target = D.mul(in_sp[i], strides[i])
        elif shape is not None:
            target = shape[i]
        else:
            begin.append(pads[i])
            out.append(D.add(full, -pads[i] - pads[i + r]))
            continue
        total = D.add(full, D.mul(target, -1))
        half = D.floordiv(total, 2)
        begin.append(half if auto == "SAME_UPPER" else D.add(total, D.mul(half, -1)))
        out.append(target)
    return Window(list(kernel), strides, dil, begin, out, [0] * r)


def conv(ctx, x, w, bias, out_dtype: str, win: Window, cs: ConvShape, *, transpose: bool = False,
         x_zero: str | None = None, w_zero: str | None = None, extra: dict | None = None, out=None,
         epilogue: str = "acc", epilogue_fn: str = "", extra_reads: dict | None = None) -> None:
    """out[n, co, p] = sum over the group's channels and window of x * w (+ bias); see the module doc.
    ``epilogue`` is a WGSL expression over ``acc`` (bias added), ``co`` and ``idx`` (fused.py)."""
    r = x.rank - 2
    if r < 1 or r > 3:
        raise ctx.unsupported(f"convolution over {r} spatial dims")
    in_sp = list(x.shape[2:])
    if out is None:
        out = ctx.output(0, out_dtype, (x.shape[0], cs.cout) + tuple(win.out))
    w, (swi, swk, swg, swc) = weight_layout(ctx, w, cs, transpose)
    if _implicit_gemm(ctx, w, cs, w_zero):
        _conv_gemm(ctx, x, w, bias, out, win, cs, transpose=transpose, x_zero=x_zero, extra=extra,
                   epilogue=epilogue, epilogue_fn=epilogue_fn, extra_reads=extra_reads)
        return
    reads = {"x": ctx.gpu(x), "w": ctx.gpu(w)}
    if bias is not None:
        reads["bias"] = ctx.gpu(bias)
    reads.update({k: ctx.gpu(t) for k, t in {**(extra or {}), **(extra_reads or {})}.items()})
    if epilogue_fn:
        epilogue = f"epi({epilogue}, co, 0u, idx)"
    if not transpose and x_zero is None and w_zero is None and _depthwise_rows(ctx, x, out, win, cs):
        _depthwise_conv(ctx, x, reads, out, win, cs, (swk, swg), epilogue, epilogue_fn)
        return
    wvec = w.value is not None and w.dtype == "float32" and out_dtype == "float32" and cs.cout_g % 4 == 0
    small = _small_conv(ctx, x, cs, win) and ctx.kclass.conv_block_small is not None
    tc_vec, tp_vec, tp_scalar = ctx.kclass.conv_block_small if small else ctx.kclass.conv_block
    tc, tp = (_channel_block(cs.cout_g, tc_vec), tp_vec) if wvec else (_channel_block(cs.cout_g), tp_scalar)
    npix = D.product(win.out)
    check_loop(ctx, nested(cs.cin_g, *cs.kernel), "the loops over input channels and window")
    params = {"C": x.shape[1], "Cout": cs.cout, "cin_g": cs.cin_g, "cout_g": cs.cout_g, "isp": D.product(in_sp),
              "P": npix, "swi": swi, "swk": swk, "swg": swg, "swc": swc, **window_params(win, in_sp)}
    grid = (D.ceildiv(npix, tp * WG), cs.cout // tc, x.shape[0])
    ctx.dispatch("conv.wgsl.j2", reads, {"out": out}, grid=grid, wg=WG, params=params, rank=r, tc=tc, tp=tp,
                 ct=compute_type(out_dtype), has_bias=bias is not None, x_zero=x_zero, w_zero=w_zero,
                 epilogue=epilogue, epilogue_fn=epilogue_fn, transpose=transpose, wvec=wvec,
                 vec4_vars=["w"] if wvec else [], store_loops=ctx.kclass.store_loops)


def _small_conv(ctx, x, cs: ConvShape, win: Window) -> bool:
    """Whether the convolution's multiply-adds per image are under the class's ``small_conv_macs`` (a symbolic
    dim counts as SYMBOLIC_DIM_GUESS; the batch only repeats the work, whatever the block): such a conv takes the
    variant that compiles quickly (options.py)."""
    macs = 1
    for d in [cs.cout, cs.cin_g, cs.ksize, *win.out]:
        macs *= d if isinstance(d, int) else SYMBOLIC_DIM_GUESS
    return macs < ctx.kclass.small_conv_macs


def _depthwise_rows(ctx, x, out, win: Window, cs: ConvShape) -> bool:
    """The row kernel (dwconv.wgsl.j2) takes 2-D depthwise f32 convolutions whose columns step by 1 or 2
    without dilation, where the kernel class asks for it (``depthwise_tile``)."""
    return (ctx.kclass.depthwise_tile[0] > 0 and x.rank == 4 and cs.cin_g == 1 and cs.cout_g == 1
            and x.dtype == "float32" and out.dtype == "float32" and win.strides[1] in (1, 2)
            and win.dilations[1] == 1)


def _depthwise_conv(ctx, x, reads: dict, out, win: Window, cs: ConvShape, strides: tuple, epilogue: str,
                    epilogue_fn: str) -> None:
    """Depthwise 2-D conv, a ``depthwise_tile`` of outputs per invocation (see dwconv.wgsl.j2); ``reads`` and
    ``epilogue`` as the direct kernel's."""
    rows, t = ctx.kclass.depthwise_tile
    swk, swg = strides
    nbx, nby = D.ceildiv(win.out[1], t), D.ceildiv(win.out[0], rows)
    in_sp = list(x.shape[2:])
    params = {"Cout": cs.cout, "P": D.product(win.out), "isp": D.product(in_sp), "nbx": nbx, "nby": nby,
              "swk": swk, "swg": swg, **window_params(win, in_sp)}
    # the window's shape, where known, is part of the shader (its loops unroll) unless the conv is small (one
    # shader for every kernel size); the rest stays uniforms
    literal = ("s0", "s1", "d0") if _small_conv(ctx, x, cs, win) else ("k0", "k1", "s0", "s1", "d0")
    fixed = {k: params.pop(k) for k in literal if isinstance(params[k], int)}
    groups = D.ceildiv(D.mul(D.mul(nby, nbx), cs.cout), WG)
    grid = grid_2d(groups)[:2] + (x.shape[0],)
    ctx.dispatch("dwconv.wgsl.j2", reads, {"out": out}, grid=grid, wg=WG, params=params, t=t, rows=rows,
                 fixed=fixed, has_bias="bias" in reads, epilogue=epilogue, epilogue_fn=epilogue_fn)


def _implicit_gemm(ctx, w, cs: ConvShape, w_zero) -> bool:
    """The GPU class runs a convolution as a tiled GEMM when the weight is a build-time constant (laid out
    [Cin/g * K, Cout]) and each group has channels enough to fill a tile's rows; depthwise and other thin
    groups keep the direct kernel (onnxruntime does the same)."""
    return (ctx.kclass.workgroup_memory and w.value is not None and w_zero is None
            and cs.cout_g >= GPU_GEMM_MIN_COUT and cs.cin_g * cs.ksize >= GPU_GEMM_MIN_K)


def _conv_gemm(ctx, x, w, bias, out, win: Window, cs: ConvShape, *, transpose: bool, x_zero, extra, epilogue: str,
               epilogue_fn: str, extra_reads) -> None:
    """Implicit GEMM (matmul_tiled.wgsl.j2, b_src 'im2col'), one product per (image, group): rows are the
    group's output channels (A: the constant weight, read down its columns), columns the output positions
    (B: the input through the window), k the group's input channels x kernel positions."""
    t = choose_tiling(cs.cout_g, D.product(win.out), True, ctx.kclass)
    in_sp = list(x.shape[2:])
    npix, isp = D.product(win.out), D.product(in_sp)
    ct = compute_type(out.dtype)
    kdim = cs.cin_g * cs.ksize
    params = {"M": cs.cout_g, "N": npix, "K": kdim, "MN": D.mul(cs.cout_g, npix), "sam": 1, "sak": cs.cout,
              "ksize": cs.ksize, "isp": isp, "bd0": x.shape[0], "bd1": cs.group, "sa0": 0, "sa1": cs.cout_g,
              "sb0": D.mul(x.shape[1], isp), "sb1": D.mul(cs.cin_g, isp), **window_params(win, in_sp)}
    reads = {"a": ctx.gpu(w), "b": ctx.gpu(x)}
    if bias is not None:
        reads["bias"] = ctx.gpu(bias)
    reads.update({k: ctx.gpu(v) for k, v in {**(extra or {}), **(extra_reads or {})}.items()})
    if epilogue_fn:
        epilogue = f"epi({epilogue}, co, 0u, idx)"
    conv_out = f"fn conv_out(acc: {ct}, co: u32, idx: u32) -> {ct} {{ return {epilogue}; }}"
    bias_term = f" + {ct}(ld_bias(co))" if bias is not None else ""
    tiled_matmul(ctx, reads, out, t, (cs.cout_g, npix, D.mul(x.shape[0], cs.group)), params, brank=2, ct=ct, epilogue=f"conv_out(acc{bias_term}, co, idx)",
                 epilogue_fn=f"{epilogue_fn}\n{conv_out}", has_c=False, zero={}, a_src="columns", b_src="im2col",
                 conv={"rank": x.rank - 2, "transpose": transpose, "x_zero": x_zero},
                 row_base=f"(wid.z % {cs.group}u) * {cs.cout_g}u + " if cs.group > 1 else "")


@lowering("ConvInteger")
def lower_conv_integer(ctx) -> None:
    integer_conv(ctx, 2, 3, None, None)


@lowering("QLinearConv")
def lower_qlinear_conv(ctx) -> None:
    x, x_scale, w, w_scale, y_scale = (ctx.inputs[i] for i in (0, 1, 3, 4, 6))
    y_zero = ctx.inputs[7] if ctx.has_input(7) else None
    bias = ctx.inputs[8] if ctx.has_input(8) else None
    cs = conv_shape(ctx, w, False)
    shape = (x.shape[0], cs.cout) + tuple(window(ctx, list(x.shape[2:]), cs.kernel).out)
    acc = ctx.temp("int32", shape)
    integer_conv(ctx, 2, 5, bias, acc)
    if w_scale.numel != 1:
        w_scale = _view(ctx, w_scale, (cs.cout,) + (1,) * (x.rank - 2))
    out = ctx.output(0, y_zero.dtype if y_zero is not None else x.dtype, shape)
    requantize(ctx, acc, [x_scale, w_scale], y_scale, y_zero, out)


def integer_conv(ctx, xz_index: int, wz_index: int, bias, out) -> None:
    """Conv of (x - x_zero) and (w - w_zero) in i32. int8/uint8 weights stay packed 4 per word (the kernel reads
    them through the prelude's accessors), their zero point subtracted on load; the GPU classes' implicit GEMM
    takes none, so there a constant weight with a non-zero zero point has it folded in (as i32)."""
    x, w = ctx.inputs[0], ctx.inputs[wz_index - 2]
    cs = conv_shape(ctx, w, False)
    win = window(ctx, list(x.shape[2:]), cs.kernel)
    extra, x_zero, w_zero = {}, None, None
    if ctx.has_input(xz_index):
        extra["xz"], x_zero = ctx.inputs[xz_index], "i32(ld_xz(0u))"
    wz = ctx.inputs[wz_index] if ctx.has_input(wz_index) else None
    if wz is not None and wz.value is not None and not wz.value.any():
        wz = None  # symmetric weights (onnxruntime's int8 default): read packed as they are
    if wz is not None and w.value is not None and wz.value is not None and ctx.kclass.workgroup_memory:
        # the implicit GEMM takes no weight zero point: fold it in (the weight widens to i32)
        zp = wz.value.astype(np.int32).reshape((-1,) + (1,) * (w.rank - 1))
        w, wz = _const(ctx, w.value.astype(np.int32) - zp), None
    if wz is not None:
        extra["wz"], w_zero = wz, ("i32(ld_wz(CO))" if wz.numel != 1 else "i32(ld_wz(0u))")
    conv(ctx, x, w, bias, "int32", win, cs, x_zero=x_zero, w_zero=w_zero, extra=extra, out=out)


@lowering("BatchNormalization")
def lower_batchnorm(ctx) -> None:
    """Inference mode: y = x * scale' + shift' per channel. With constant weights scale'/shift' are folded
    at build time; otherwise the whole formula runs in the elementwise kernel."""
    x = ctx.inputs[0]
    eps = float(ctx.attr("epsilon", 1e-5))
    per_channel = (x.shape[1],) + (1,) * (x.rank - 2) if x.rank > 1 else (x.shape[0],)
    weights = ctx.inputs[1:5]
    out = ctx.output(0, x.dtype, x.shape)
    if int(ctx.attr("training_mode", 0)):
        weights[2:4] = batch_statistics(ctx, x)
    if all(t.value is not None for t in weights):
        s, b, mean, var = (t.value.astype(np.float64) for t in weights)
        scale = s / np.sqrt(var + eps)
        shift = b - mean * scale
        consts = [_const(ctx, v.astype(np.float32).reshape(per_channel)) for v in (scale, shift)]
        elementwise(ctx, lambda c, a, it, ot: f"({a[0]} * {a[1]} + {a[2]})", [x] + consts, out)
        return
    views = [_view(ctx, t, per_channel) for t in weights]
    eps_lit = repr(float(np.float32(eps))) + "f"
    expr = lambda c, a, it, ot: f"(({a[0]} - {a[3]}) / sqrt({a[4]} + {eps_lit}) * {a[1]} + {a[2]})"  # noqa: E731
    elementwise(ctx, expr, [x] + views, out)


def batch_statistics(ctx, x) -> list:
    """Training mode: the batch's per-channel mean and (population) variance, on the GPU; the running
    statistics (outputs 1 and 2) blend them with the inputs' by ``momentum``."""
    c = x.shape[1]
    mean, var = ctx.temp(x.dtype, (c,)), ctx.temp(x.dtype, (c,))
    stats = [sum_stat("f32", "f32(v)", "{a} / f32(n_R)"),
             sum_stat("f32", "(f32(v) - s0) * (f32(v) - s0)", "{a} / f32(n_R)")]
    row_kernel(ctx, x, [a for a in range(x.rank) if a != 1], stats, row_outs=[("m", mean, "s0"), ("vr", var, "s1")])
    mom = float(ctx.attr("momentum", 0.9))
    keep, take = wgsl_literal(mom, "f32"), wgsl_literal(1.0 - mom, "f32")
    blend = lambda c_, a, it, ot: f"({a[0]} * {keep} + {a[1]} * {take})"  # noqa: E731
    for i, (running, batch) in enumerate(((ctx.inputs[3], mean), (ctx.inputs[4], var)), start=1):
        if i < len(ctx.node.outputs) and ctx.node.outputs[i].name:
            elementwise(ctx, blend, [running, batch], ctx.output(i, x.dtype, (c,)))
    return [mean, var]


def _const(ctx, value: np.ndarray):
    return ctx._l.constant(np.ascontiguousarray(value))


def _view(ctx, t, shape):
    """The same storage seen with another shape (a per-channel vector as [C, 1, 1])."""
    if t.value is not None:
        return _const(ctx, t.value.reshape([int(d) for d in shape]))
    return ctx._l.program.new_tensor(t.dtype, tuple(shape), alias=t)
