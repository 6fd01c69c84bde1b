"""TfIdfVectorizer over integer tokens: the pool's n-grams become constant tables at build time, and one
invocation per (row, output index) counts in its row the occurrences of the pool n-grams mapped to that index,
then weighs them (TF, IDF, TFIDF).

Counting follows ONNX's reference: n-grams of length >= 2 are matched at every skip distance d = 1 ..
max_skip_count + 1 (tokens i, i + d, ..., i + (n - 1) d of one row), unigrams once (d = 1). Only pool n-grams
with min_gram_length <= n <= max_gram_length count; a repeated pool n-gram keeps its last index.
"""

from __future__ import annotations

import numpy as np

from ..registry import lowering


def _pool_grams(ctx) -> list[tuple[tuple[int, ...], int]]:
    """[(tokens, output index)] of the pool n-grams that count, in pool order (last duplicate wins)."""
    pool = [int(v) for v in ctx.attr("pool_int64s") or []]
    if not pool:
        raise ctx.unsupported("only integer pools (pool_int64s): string tensors are not supported")
    counts, indexes = ctx.attr("ngram_counts"), ctx.attr("ngram_indexes")
    lo, hi = ctx.attr("min_gram_length"), ctx.attr("max_gram_length")
    grams: dict[tuple[int, ...], int] = {}
    gid = 0
    for size, start in enumerate(counts, start=1):
        end = counts[size] if size < len(counts) else len(pool)
        for k in range((end - start) // size):
            if lo <= size <= hi:
                grams[tuple(pool[start + k * size: start + (k + 1) * size])] = int(indexes[gid])
            gid += 1
    return list(grams.items())


@lowering("TfIdfVectorizer")
def lower_tfidf(ctx) -> None:
    x = ctx.inputs[0]
    if x.rank not in (1, 2) or not isinstance(x.shape[-1], int):
        raise ctx.unsupported("input [C] or [B, C] with a static C")
    mode = ctx.attr("mode")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in ("TF", "IDF", "TFIDF"):
        raise ctx.unsupported(f"mode {mode!r}")
    grams = _pool_grams(ctx)
    size = max(int(i) for i in ctx.attr("ngram_indexes")) + 1
    rows = x.shape[0] if x.rank == 2 else 1
    out = ctx.output(0, "float32", (rows, size) if x.rank == 2 else (size,))
    if out.numel == 0:
        return
    weights = ctx.attr("weights")
    if not grams or x.shape[-1] == 0:
        ctx.set_const(0, np.zeros([int(d) for d in out.shape], np.float32))
        return
    tokens = np.array([t for g, _ in grams for t in g], np.int32)
    table = np.array([(sum(len(g) for g, _ in grams[:k]), len(grams[k][0]), grams[k][1]) for k in range(len(grams))],
                     np.int32).reshape(-1)
    reads = {"x": ctx.gpu(x), "tok": ctx.gpu(ctx._l.constant(tokens)), "gram": ctx.gpu(ctx._l.constant(table))}
    if weights is not None and mode != "TF":
        reads["w"] = ctx.gpu(ctx._l.constant(np.asarray(weights, np.float32)))
    params = {"n": out.numel, "O": size, "C": x.shape[-1], "G": len(grams), "D": ctx.attr("max_skip_count", 0) + 1}
    ctx.dispatch("tfidf.wgsl.j2", reads, {"out": out}, work=out.numel, params=params, mode=mode,
                 weighted="w" in reads)
