"""Signal ops: DFT, STFT, the Hann/Hamming/Blackman windows and MelWeightMatrix.

DFT and STFT share one kernel (``dft.wgsl.j2``): one invocation per output frequency (or, for an inverse
real transform, per output sample) sums the signal: a direct O(n * L) transform whose twiddles are taken at
((j * k) mod L) / L, so the angle stays exact in f32. STFT is the same sum over a frame of the signal (frame
f starts at ``f * frame_step``) weighted by the window. Lengths and axes are shape arithmetic (host
inputs); signals, windows and frequency limits are data.
"""

from __future__ import annotations

from onnx.helper import tensor_dtype_to_np_dtype

from ... import dims as D
from ..registry import lowering
from .helpers import compute_type, generate, normalize_axis
from .reduce import LOOP_BUDGET, literal

PASSES_FROM, PASS_TERMS = LOOP_BUDGET, 32768  # from this length, the terms are summed in passes of PASS_TERMS
WIDE_FROM = 2**32  # j * k from here on does not fit a u32


def _host_int(ctx, i: int, what: str) -> int:
    v = ctx.host_ints(i)
    if v is None or len(v) != 1 or not isinstance(v[0], int):
        raise ctx.unsupported(f"{what} must be a constant scalar known at build time")
    return v[0]


def _transform(ctx, x, out, *, outer, frames, K, inner, m, L, strides, inverse=False, irfft=False,
               window=None) -> None:
    """out[o, f, k, i, :] = sum_{j < m} x[o*so + f*sf + j*sj + i*si, :] (* window[j]) * exp(-+2 pi i j k / L)."""
    work = D.product([outer, frames, K, inner])
    if work == 0:
        return
    params = {"n": work, "K": K, "inner": inner, "frames": frames, "m": m, "L": L, **strides}
    reads = {"x": ctx.gpu(x), **({"w": ctx.gpu(window)} if window is not None else {})}
    # past lavapipe's loop limit (it stops silently), the sum over j runs in passes of PASS_TERMS, each adding
    # to the last one's partial sums
    spans = [None]
    if isinstance(m, int) and m >= PASSES_FROM:
        spans = [(j, min(j + PASS_TERMS, m)) for j in range(0, m, PASS_TERMS)]
    # j * k in u32 overflows past 2^32 (a transform of 70 000: 4.9e9): carry the phase instead
    wide = not (isinstance(m, int) and isinstance(K, int) and (m - 1) * (K - 1) < WIDE_FROM)
    prev = None
    for i, span in enumerate(spans):
        last = i == len(spans) - 1
        dst = out if last else ctx.temp("float32", out.shape)
        ctx.dispatch("dft.wgsl.j2", {**reads, **({"prev": prev} if prev is not None else {})}, {"out": dst},
                     work=work, params=params, complex=x.shape[-1] == 2, inverse=inverse, irfft=irfft,
                     windowed=window is not None, span=span, last=last, wide=wide)
        prev = dst


@lowering("DFT")
def lower_dft(ctx) -> None:
    x = ctx.inputs[0]
    if ctx.opset >= 20:
        axis = _host_int(ctx, 2, "axis") if ctx.has_input(2) else -2
    else:
        axis = ctx.attr("axis", 1)
    axis = normalize_axis(axis, x.rank)
    c = x.shape[-1]
    if axis == x.rank - 1 or c not in (1, 2):
        raise ctx.unsupported("the last dim holds 1 (real) or 2 (complex) values and is not the transform axis")
    inverse, onesided = bool(ctx.attr("inverse", 0)), bool(ctx.attr("onesided", 0))
    irfft = inverse and onesided
    n = x.shape[axis]
    if ctx.has_input(1) and ctx.inputs[1] is not None:
        L = _host_int(ctx, 1, "dft_length")
    else:
        L = D.mul(2, D.add(n, -1)) if irfft else n
    if irfft:
        K, m = L, D.dmin(n, D.add(D.floordiv(L, 2), 1))
    else:
        K, m = (D.add(D.floordiv(L, 2), 1) if onesided else L), D.dmin(n, L)
    inner = D.product(x.shape[axis + 1:-1])
    out = ctx.output(0, x.dtype, (*x.shape[:axis], K, *x.shape[axis + 1:-1], 1 if irfft else 2))
    strides = {"so": D.product([n, inner, c]), "sf": 0, "sj": D.mul(inner, c), "si": c}
    _transform(ctx, x, out, outer=D.product(x.shape[:axis]), frames=1, K=K, inner=inner, m=m, L=L,
               strides=strides, inverse=inverse, irfft=irfft)


@lowering("STFT")
def lower_stft(ctx) -> None:
    x = ctx.inputs[0]
    if x.rank != 3 or x.shape[-1] not in (1, 2):
        raise ctx.unsupported("the signal must be [batch, length, 1 or 2]")
    hop = _host_int(ctx, 1, "frame_step")
    window = ctx.inputs[2] if ctx.has_input(2) else None
    if ctx.has_input(3):
        L = _host_int(ctx, 3, "frame_length")
    elif window is not None:
        L = window.shape[0]
    else:
        L = x.shape[1]
    if not isinstance(L, int) or L <= 0 or hop <= 0:
        raise ctx.unsupported("frame_length and frame_step must be positive constants")
    frames = D.add(D.floordiv(D.add(x.shape[1], -L), hop), 1)
    K = L // 2 + 1 if ctx.attr("onesided", 1) else L
    c = x.shape[-1]
    out = ctx.output(0, x.dtype, (x.shape[0], frames, K, 2))
    strides = {"so": D.mul(x.shape[1], c), "sf": hop * c, "sj": c, "si": 0}
    _transform(ctx, x, out, outer=x.shape[0], frames=frames, K=K, inner=1, m=L, L=L, strides=strides,
               window=window)


# -- windows: w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size (periodic) or size - 1 ----------
_WINDOWS = {"HannWindow": (0.5, 0.5, 0.0), "HammingWindow": (25.0 / 46.0, 21.0 / 46.0, 0.0),
            "BlackmanWindow": (0.42, 0.5, 0.08)}


@lowering("HannWindow", "HammingWindow", "BlackmanWindow")
def lower_window(ctx) -> None:
    size = ctx.host_ints(0)
    if size is None or len(size) != 1:
        raise ctx.unsupported("size must be known at build time")
    size = size[0]
    dt = tensor_dtype_to_np_dtype(ctx.attr("output_datatype", 1)).name
    out = ctx.output(0, dt, (size,))
    if out.numel == 0:
        return
    a0, a1, a2 = (literal(v) for v in _WINDOWS[ctx.op])
    span = size if ctx.attr("periodic", 1) else D.add(size, -1)
    t = "(f32(gi) * 6.283185307179586 / f32(N))"
    expr = f"{compute_type(dt)}({a0} - {a1} * cos({t}) + {a2} * cos(2.0 * {t}))"
    generate(ctx, out, expr, {"N": span})


@lowering("MelWeightMatrix")
def lower_mel_weight_matrix(ctx) -> None:
    """Triangular filters: out[j, i] rises from mel bin i to i + 1 and falls to i + 2 (ONNX's reference)."""
    ints = [ctx.host_ints(i) for i in range(3)]
    if any(v is None or len(v) != 1 or not isinstance(v[0], int) for v in ints):
        raise ctx.unsupported("num_mel_bins, dft_length and sample_rate must be constants known at build time")
    (mels,), (L,), (rate,) = ints
    dt = tensor_dtype_to_np_dtype(ctx.attr("output_datatype", 1)).name
    out = ctx.output(0, dt, (L // 2 + 1, mels))
    if out.numel == 0:
        return
    reads = {"lo": ctx.gpu(ctx.inputs[3]), "hi": ctx.gpu(ctx.inputs[4])}
    params = {"n": out.numel, "mels": mels, "L": L, "rate": rate}
    ctx.dispatch("mel.wgsl.j2", reads, {"out": out}, work=out.numel, params=params, t=compute_type(dt))


