"""CumSum / CumProd over rows too long for one invocation: a chunked scan (``scan_chunks.wgsl.j2``).

llvmpipe (lavapipe) ends an invocation's loops after 65535 iterations, silently: a vocoder's cumulative sum over
a waveform's samples stopped at element 65535. Per-chunk scans, a scan of the chunk totals and an add-back keep
every invocation's loop under ``C`` (or ``NC``) iterations; a real GPU gains the parallelism as well.
"""

from __future__ import annotations

from ... import dims as D

CHUNK = 512  # elements a chunk; the totals' scan loops R / CHUNK times (65535 chunks = 33.5 M elements)
MAX_CHUNKS = 65535


def chunk_size(n) -> int:
    """A chunk length keeping both loops under the limit for a static row length ``n``."""
    return max(CHUNK, -(-n // MAX_CHUNKS)) if isinstance(n, int) else CHUNK


def row_bound(ctx, n) -> int | None:
    """``n``, or a symbolic ``n`` at the build's dim bounds (--dim lo..hi, a generation build's max_seq): a row
    that cannot reach the limit keeps the one-pass scan. None when ``n`` is unbounded."""
    if isinstance(n, int):
        return n
    bounds = ctx._l.program.bounds
    if not D.names(n) <= set(bounds):
        return None
    try:
        return D.evaluate(D.to_json(n), bounds)
    except (KeyError, ValueError, TypeError):
        return None


def chunked_scan(ctx, x, kept, red, scan: dict) -> None:
    """Emit the three steps for ``x`` read as rows (``kept`` groups) x R (``red`` groups); ``scan`` as the row
    kernel's (out, type, init, combine, exclusive, reverse)."""
    rows = D.product([k for k, _ in kept])
    n = D.product([r for r, _ in red])
    c = chunk_size(n)
    nc = D.ceildiv(n, c)
    params: dict = {"rows": rows, "R": n, "C": c, "NC": nc}
    for i, (size, stride) in enumerate(kept):
        params[f"k{i}"], params[f"ks{i}"] = size, stride
    for i, (size, stride) in enumerate(red):
        params[f"r{i}"], params[f"rs{i}"] = size, stride
    out = scan["out"]
    part = ctx.temp(out.dtype, (D.mul(rows, n),))
    tot = ctx.temp(out.dtype, (D.mul(rows, nc),))
    pre = ctx.temp(out.dtype, (D.mul(rows, nc),))
    tctx = dict(kept=kept, reduced=red, type=scan["type"], init=scan["init"], combine=scan["combine"],
                exclusive=scan["exclusive"], reverse=scan["reverse"])
    ctx.dispatch("scan_chunks.wgsl.j2", {"x": ctx.gpu(x)}, {"part": part, "tot": tot}, work=D.mul(rows, nc),
                 params=params, wg=64, phase="local", **tctx)
    ctx.dispatch("scan_chunks.wgsl.j2", {"tot": tot}, {"pre": pre}, work=rows, params=params, wg=64,
                 phase="totals", **tctx)
    ctx.dispatch("scan_chunks.wgsl.j2", {"part": part, "pre": pre}, {"out": out}, work=D.mul(rows, n),
                 params=params, wg=64, phase="add", **tctx)
