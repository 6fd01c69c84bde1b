"""Audio pre-processing: ``webinfer.Resample``, PCM at a rate bound per run resampled to the model's rate.

Written by ``graph/audio_prologue.py`` (``--preprocess audio``). The input rate is a dim (attribute
``rate_dim``, bound per run like a sequence length: ``runtime/audio.py`` passes the caller's rate), so one
artifact takes PCM at any rate and the filter is made on the GPU: the Kaiser-windowed sinc of
``scipy.signal.resample_poly`` (``resample.wgsl.j2``). The output has ``ceil(n * out_rate / rate)`` samples,
or ``length`` of them when given (zero-padded or truncated: Whisper's 30-second window).
"""

from __future__ import annotations

import onnx_ir as ir

from ... import dims as D
from ..registry import WEBINFER_DOMAIN, lowering
from .reduce import literal

NORM_WG = 256


@lowering("Resample", domain=WEBINFER_DOMAIN)
def lower_resample(ctx) -> None:
    x = ctx.inputs[0]
    if x.dtype != "float32" or x.rank != 1:
        raise ctx.unsupported("the signal must be float32 [samples]")
    out_rate = int(ctx.attr("out_rate", 0))
    beta = float(ctx.attr("beta", 5.0))
    name = ctx.attr("rate_dim", "")
    if not name or out_rate < 1 or not 0 <= beta <= 12:
        raise ctx.unsupported("needs rate_dim, out_rate >= 1 and 0 <= beta <= 12")
    rate = ctx._l._dim(ir.SymbolicDim(name), "audio", 0)  # (a dim no input carries: bound per run)
    most = (2**32 - 1) // out_rate  # (the kernel's integer offsets: rate * out_rate < 2^32)
    ctx.assume(D.add(rate, -1), "the sample rate must be at least 1 Hz")
    ctx.assume(D.add(most, D.mul(rate, -1)), f"the sample rate must be at most {most} Hz")
    length = int(ctx.attr("length", 0))
    n = length if length > 0 else D.ceildiv(D.mul(x.shape[0], out_rate), rate)
    out = ctx.output(0, "float32", (n,))
    if n == 0:
        return
    params = {"rate": rate, "out_rate": out_rate}
    norm = ctx.temp("float32", (1,))
    ctx.dispatch("resample.wgsl.j2", {}, {"sum": norm}, grid=(1, 1, 1), wg=NORM_WG, params=params, kind="norm",
                 beta=literal(beta))
    ctx.dispatch("resample.wgsl.j2", {"x": ctx.gpu(x), "sum": norm}, {"out": out}, work=n,
                 params={**params, "n": n, "n_in": x.shape[0]}, kind="apply", beta=literal(beta))
