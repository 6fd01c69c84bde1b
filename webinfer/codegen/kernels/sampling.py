"""webinfer.SampleToken: choose the next token on the GPU so a decode step reads back 4 bytes.

Written by the generation-head rewrite (graph/llm/head.py). One workgroup of 256 invocations walks the
vocabulary: repetition penalty (as transformers applies it: divide positive logits, multiply negative
ones), then greedy argmax when the temperature is 0 (lowest index on ties, like numpy), else temperature,
top-k and top-p by bisection over the float's order-preserving bit pattern (32 exact steps each, no sort),
then a draw from the kept probability mass with a counter-based random number (PCG hash of seed and
step), located by a prefix sum over contiguous chunks.

An optional fifth input, a bitmask of allowed tokens (u32 words, bit i % 32 of word i // 32), gives every
disallowed token -inf before the penalty, temperature, top-k and top-p (constrained decoding, llm/constrain);
graphs without it (artifacts built before) sample as they did.
"""

from __future__ import annotations

from ..registry import lowering

WG = 256


@lowering("SampleToken", domain="webinfer")
def lower_sample_token(ctx) -> None:
    logits, params, seed, penalty = ctx.inputs[:4]
    mask = ctx.inputs[4] if len(ctx.inputs) > 4 else None
    vocab, n_pen = logits.shape[-1], penalty.shape[0]
    if not isinstance(vocab, int) or not isinstance(n_pen, int):
        raise ctx.unsupported("vocabulary size and penalty list length must be fixed")
    rows = logits.numel
    out = ctx.output(0, "int32", (1,))
    scores = ctx.temp("float32", (vocab,))
    if mask is not None and mask.shape != ((vocab + 31) // 32,):
        raise ctx.unsupported(f"the token mask must hold {(vocab + 31) // 32} u32 words")
    reads = {"logits": ctx.gpu(logits), "sp": ctx.gpu(params), "seed": ctx.gpu(seed), "pen": ctx.gpu(penalty)}
    if mask is not None:
        reads["allow"] = ctx.gpu(mask)
    ctx.dispatch("sample.wgsl.j2", reads, {"sc": scores, "out": out},
                 grid=(1, 1, 1), params={"row": rows - vocab}, wg=WG, vocab=vocab, n_pen=n_pen,
                 chunk=(vocab + WG - 1) // WG, masked=mask is not None)
