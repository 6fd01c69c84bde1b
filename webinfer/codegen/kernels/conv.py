"""Conv (1-D/2-D/3-D, groups, dilations, auto_pad), ConvInteger, QLinearConv and BatchNormalization.

Conv is a direct convolution, rank-generic: each invocation computes ``tc`` output channels x ``tp`` output
positions in registers, looping over the input channels of its group and the kernel window. Constant weights
are re-laid out at build time as ``[Cin/group * K, Cout]`` so one invocation's channels are adjacent.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import dims as D
from ..registry import lowering
from .elementwise import elementwise
from .helpers import compute_type

WG = 64


@dataclass
class Window:
    """Sliding-window geometry over the spatial dims, shared by conv and pooling."""

    kernel: list
    strides: list
    dilations: list
    pads: list  # begin pads, per spatial dim
    out: list  # output spatial sizes
    ends: list  # end pads (the padded extent; pooling's count_include_pad counts up to it)


def window(ctx, in_spatial, kernel, ceil_mode: bool = False) -> Window:
    """Output sizes and begin pads from the node's attributes (ONNX's Conv/Pool formulas)."""
    r = len(in_spatial)
    strides = [int(s) for s in ctx.attr("strides", [1] * r)]
    dil = [int(d) for d in ctx.attr("dilations", [1] * r)]
    pads = [int(p) for p in ctx.attr("pads", [0] * (2 * r))]
    auto = ctx.attr("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    begin, out, ends = [], [], []
    for i in range(r):
        size, eff = in_spatial[i], (kernel[i] - 1) * dil[i] + 1
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            o = D.ceildiv(size, strides[i])
            total = D.dmax(D.add(D.add(D.mul(D.add(o, -1), strides[i]), eff), D.mul(size, -1)), 0)
            lo = D.floordiv(total, 2) if auto == "SAME_UPPER" else D.add(total, D.mul(D.floordiv(total, 2), -1))
            begin.append(lo)
            ends.append(D.add(total, D.mul(lo, -1)))
            out.append(o)
            continue
        pb, pe = (0, 0) if auto == "VALID" else (pads[i], pads[i + r])
        span = D.add(size, pb + pe - eff)
        if ceil_mode:
            o = D.add(D.ceildiv(span, strides[i]), 1)
            if isinstance(o, int) and (o - 1) * strides[i] >= size + pb:
                o -= 1
        else:
            o = D.add(D.floordiv(span, strides[i]), 1)
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


def _channel_block(per_group: int) -> int:
    for tc in (4, 2):
        if per_group % tc == 0:
            return tc
    return 1


@lowering("Conv")
def lower_conv(ctx) -> None:
    x, w = ctx.inputs[0], ctx.inputs[1]
    bias = ctx.inputs[2] if ctx.has_input(2) else None
    conv(ctx, x, w, bias, x.dtype)


def conv(ctx, x, w, bias, out_dtype: str, *, x_zero=None, w_zero=None, epilogue=None, extra=None) -> None:
    """out[n, co, p] = sum over the group's channels and window of x * w (+ bias); see the module doc."""
    r = x.rank - 2
    if r < 1 or r > 3:
        raise ctx.unsupported(f"Conv over {r} spatial dims")
    group = int(ctx.attr("group", 1))
    cout, cin_g = int(w.shape[0]), int(w.shape[1])
    kernel = [int(k) for k in w.shape[2:]]
    ksize = int(np.prod(kernel))
    in_sp = list(x.shape[2:])
    win = window(ctx, in_sp, kernel)
    out = ctx.output(0, out_dtype, (x.shape[0], cout) + tuple(win.out))
    tc, tp = _channel_block(cout // group), 4
    if w.value is not None:
        wt = w.value.reshape(cout, cin_g * ksize).T  # [Cin/g * K, Cout]
        w, swr, swc = ctx._l.constant(np.ascontiguousarray(wt)), cout, 1
    else:
        swr, swc = 1, cin_g * ksize
    npix = D.product(win.out)
    params = {"C": x.shape[1], "Cout": cout, "cin_g": cin_g, "cout_g": cout // group, "isp": D.product(in_sp),
              "P": npix, "K": ksize, "swr": swr, "swc": swc, **window_params(win, in_sp)}
    reads = {"x": ctx.gpu(x), "w": ctx.gpu(w)}
    if bias is not None:
        reads["bias"] = ctx.gpu(bias)
    reads.update(extra or {})
    ct = compute_type(out_dtype) if epilogue is None else "i32"
    grid = (D.ceildiv(npix, tp * WG), cout // tc, x.shape[0])
    ctx.dispatch("conv.wgsl.j2", reads, {"out": out}, grid=grid, wg=WG, params=params, rank=r, tc=tc, tp=tp,
                 ct=ct, has_bias=bias is not None, x_zero=x_zero, w_zero=w_zero, epilogue=epilogue or "acc")


@lowering("BatchNormalization")
def lower_batchnorm(ctx) -> None:
    """Inference mode: y = x * scale' + shift' per channel. With constant weights scale'/shift' are folded
    at build time; otherwise the whole formula runs in the elementwise kernel."""
    if int(ctx.attr("training_mode", 0)):
        raise ctx.unsupported("BatchNormalization in training mode")
    x = ctx.inputs[0]
    eps = float(ctx.attr("epsilon", 1e-5))
    per_channel = (x.shape[1],) + (1,) * (x.rank - 2) if x.rank > 1 else (x.shape[0],)
    weights = ctx.inputs[1:5]
    out = ctx.output(0, x.dtype, x.shape)
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


def _const(ctx, value: np.ndarray):
    return ctx._l.constant(np.ascontiguousarray(value))


def _view(ctx, t, shape):
    """The same storage seen with another shape (a per-channel vector as [C, 1, 1])."""
    if t.value is not None:
        return _const(ctx, t.value.reshape([int(d) for d in shape]))
    return ctx._l.program.new_tensor(t.dtype, tuple(shape), alias=t)
