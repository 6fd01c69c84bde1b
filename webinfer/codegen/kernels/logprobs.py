"""webinfer.TokenLogprobs: the log-probability of the sampled token and the most likely tokens, on the GPU.

Written by the generation head's logit extras (graph/llm/logit_extras.py) after SampleToken, so an
OpenAI ``logprobs`` request reads back a few floats per token, never the logits row. One workgroup of 256
invocations: the row's log-sum-exp (max, then the sum of exp), then ``k`` rounds of an arg-max over the
tokens ranked below the previous round's pick (value descending, lowest index first on ties: no sort, no
scratch). The output holds [chosen, top values (``top`` slots), top ids as floats (exact below 2^24)].
``k`` comes from a one-element input at run time; above ``top`` (the generator writes 0xffffffff when no
logprobs are asked for) the kernel returns at once, so decoding without logprobs pays one empty dispatch.
"""

from __future__ import annotations

from ..registry import lowering

WG = 256
TOP = 20  # OpenAI's largest top_logprobs


@lowering("TokenLogprobs", domain="webinfer")
def lower_token_logprobs(ctx) -> None:
    logits, token, k = ctx.inputs
    vocab = logits.shape[-1]
    if not isinstance(vocab, int):
        raise ctx.unsupported("the vocabulary size must be fixed")
    if vocab >= 2**24:
        raise ctx.unsupported("token ids must be exact in float32 (a vocabulary under 2^24)")
    out = ctx.output(0, "float32", (1 + 2 * TOP,))
    ctx.dispatch("logprobs.wgsl.j2", {"logits": ctx.gpu(logits), "tok": ctx.gpu(token), "kk": ctx.gpu(k)},
                 {"out": out}, grid=(1, 1, 1), params={"row": logits.numel - vocab}, wg=WG, vocab=vocab, top=TOP)
