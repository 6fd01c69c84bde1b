"""Speculative decoding's verification head (graph/llm/verify.py): ``webinfer.LastRows`` feeds the LM head
the last rows of the hidden states, ``webinfer.VerifyDraft`` judges a draft against the target's rows.

VerifyDraft is one workgroup of 256 invocations walking the rows in order, each row as SampleToken treats the
last one (greedy argmax, lowest index on ties; else temperature, top-k and top-p by bisection over the
float's order-preserving bits, no repetition penalty). Greedy: draft token i is accepted while it equals
row i's argmax; the first mismatch (or the last row) gives the target's token. Sampling: the draft is a
deterministic proposal (q is a point mass), so token d is accepted with probability p(d) (Leviathan et al.'s
min(1, p/q)); on a rejection the token is drawn from p without d, renormalised (max(0, p - q)); after the
last draft token, from p. Each draw is a counter-based random number (PCG hash of seed, step and 2 i / 2 i +
1), so tests reproduce it in numpy. The output is [accepted count, the target's token at that row].
"""

from __future__ import annotations

from ..registry import lowering
from .helpers import generate

WG = 256


@lowering("LastRows", domain="webinfer")
def lower_last_rows(ctx) -> None:
    x, ids = ctx.inputs
    b, s, h = x.shape
    v = ids.shape[0]
    out = ctx.output(0, x.dtype, (b, v, h))
    # element gi of [b, v, h] is element gi + (batch + 1) (s - v) h of [b, s, h]
    generate(ctx, out, "ld_x(gi + (gi / vh + 1u) * off)", {"vh": v * h, "off": (s - v) * h},
             reads={"x": ctx.gpu(x)})


@lowering("VerifyDraft", domain="webinfer")
def lower_verify_draft(ctx) -> None:
    logits, ids, params, seed = ctx.inputs
    vocab = logits.shape[-1]
    if not isinstance(vocab, int):
        raise ctx.unsupported("the vocabulary size must be fixed")
    rows = ids.shape[0]
    out = ctx.output(0, "int32", (2,))
    scores = ctx.temp("float32", (vocab,))
    ctx.dispatch("verify.wgsl.j2", {"logits": ctx.gpu(logits), "dr": ctx.gpu(ids), "sp": ctx.gpu(params),
                                    "seed": ctx.gpu(seed)}, {"sc": scores, "out": out},
                 grid=(1, 1, 1), params={"row0": logits.numel - rows * vocab, "rows": rows}, wg=WG, vocab=vocab,
                 chunk=(vocab + WG - 1) // WG)
