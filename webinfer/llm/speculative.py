"""Speculative decoding over the in-place KV cache. Standard library only (it runs in Pyodide too).

Each round a drafter proposes k tokens; the target runs the last accepted token and the k drafts as ONE
step (k + 1 positions written into its cache) and its verification head (graph/llm/verify.py) returns how
many drafts it accepts and its own token after them, 8 bytes read back. Greedy: a draft is accepted while
it equals the target's argmax, so the ids are those of plain decoding. Sampling: a draft is a deterministic
proposal, accepted with the target's probability p(d), else the token comes from p without d: every token
is distributed exactly as plain sampling's (codegen/kernels/verify.py).

Rejected positions roll back by the position counter alone: the cache rows past it hold stale keys/values
that the next step overwrites before any query sees them (the attention reads positions < past + step
length, and the step writes its own rows first), as a chat turn overwrites what an earlier answer left.

Drafters:
- ``"ngram"`` (prompt lookup, llm/lookup.py): the continuation of the latest earlier occurrence of the
  longest matching suffix of the prompt + output, drafted only while drafts pay for themselves (the loop
  measures what a verification step costs in plain steps and tells the drafter); nothing to propose -> a
  plain one-token step.
- another ``Generator`` of the same vocabulary (a small model): it decodes k tokens greedily over its own
  cache, which keeps the ids the target has accepted (only the tokens it lacks are fed each round).
"""

from __future__ import annotations

import struct
import time

from ..errors import WebinferError
from .lookup import NgramDrafter
from .streaming import NoText, common_prefix

GREEDY = struct.pack("<4f", 0.0, 0.0, 1.0, 1.0)
# Drafts a step by default: prompt lookup costs nothing, and up to 8 rows cost one tile of the software class's
# int4 GEMM (the verification step of 5 rows costs about what 8 do); a draft model pays a step per token.
DEFAULT_NGRAM_TOKENS, DEFAULT_MODEL_TOKENS = 7, 4


class ModelDrafter:
    """A small model's greedy continuation; its cache follows the target's accepted ids (the draft
    Generator's own record of what its cache holds, so it stays usable on its own)."""

    def __init__(self, draft, k: int):
        self.draft, self.k = draft, k

    async def propose(self, history: list[int]) -> list[int]:
        d = self.draft
        if len(history) + self.k > d.max_seq:
            return []
        common = common_prefix(d._cached, history, len(history) - 1)
        d._cached = []  # unknown until the proposals are read
        ticket = d._launch(history[common:], common, GREEDY, 0, 0, [], None, True)
        pos, out = len(history), []
        for j in range(self.k):
            nxt = None
            if j + 1 < self.k:  # the next token is taken from this step's output on the GPU
                nxt = d._launch([0], pos, GREEDY, 0, 0, [], ticket.outputs["next_token"], True)
            (tok,) = await d.core.collect(ticket)
            out.append(struct.unpack("<i", tok.data[:4])[0])
            ticket, pos = nxt, pos + 1
        d._cached = list(history) + out[:-1]
        return out


def make_drafter(speculative, target, k: int | None):
    """``"ngram"`` or a Generator (the draft model) -> a drafter proposing ``k`` tokens; a drafter passed
    in (e.g. ``NgramDrafter(k, min_ngram=2)``) is used as it is."""
    if k is None:
        k = DEFAULT_NGRAM_TOKENS if speculative == "ngram" else DEFAULT_MODEL_TOKENS
    check_draft_tokens(k)
    if speculative == "ngram":  # one per Generator and k: what it measured of the machine carries over
        kept = getattr(target, "_lookup_drafter", None)
        if kept is None or kept.k != k:
            kept = NgramDrafter(k)
            target._lookup_drafter = kept
        return kept
    if isinstance(speculative, (NgramDrafter, ModelDrafter)):  # a drafter made with other settings
        return speculative
    if hasattr(speculative, "core") and hasattr(speculative, "_launch"):
        tv, dv = vocab_size(target), vocab_size(speculative)
        if tv != dv:
            raise WebinferError(f"the draft model's vocabulary ({dv}) is not the target's ({tv}): speculative "
                                "decoding needs a draft of the same tokenizer")
        return ModelDrafter(speculative, k)
    raise WebinferError(f"speculative must be 'ngram' or a Generator (a draft model), got {speculative!r}")


def check_draft_tokens(k) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 32:
        raise WebinferError(f"draft_tokens must be an integer in 1..32, got {k!r}")


def vocab_size(gen) -> int:
    logits = gen.core.output_tensor("logits")
    if logits is None:
        raise WebinferError("the artifact has no logits output")
    return int(logits.shape[-1])


def check_verify_head(gen) -> None:
    if gen.core.output_tensor("verify_result") is None:
        raise WebinferError("this artifact has no verification head (built before speculative decoding): "
                            "rebuild it to decode speculatively")


async def agenerate_speculative(gen, ids: list[int], speculative, draft_tokens: int | None, token_type, *,
                                max_new_tokens: int, temperature: float, top_k: int, top_p: float, seed: int,
                                eos, repetition_penalty: float = 1.0):
    """Async iterator of Tokens (``token_type``: llm.generate.Token, given so this module does not import it
    back), as ``Generator.agenerate`` (which checks the options and calls this)."""
    if repetition_penalty != 1.0:
        raise WebinferError("speculative decoding does not take a repetition penalty (the verification head "
                            "has none): leave it at 1")
    if getattr(getattr(gen, "logit_options", None), "active", False):
        raise WebinferError("speculative decoding does not take logit_bias or logprobs (the verification head "
                            "applies no bias and reports no logprobs): use one or the other")
    check_verify_head(gen)
    drafter = make_drafter(speculative, gen, draft_tokens)
    if hasattr(drafter, "reset"):
        drafter.reset()
    k = drafter.k
    params = struct.pack("<4f", temperature, float(top_k), top_p, 1.0)
    decoder = gen.tokenizer.stream_decoder(skip_special_tokens=True) if gen.tokenizer is not None else NoText()
    out_ids: list[int] = []
    history = list(ids)
    reused = common_prefix(gen._cached, ids, len(ids) - 1)
    spec = {"draft_tokens": k, "drafted": 0, "accepted": 0, "verify_steps": 0, "plain_steps": 0, "waited_steps": 0}
    gen.stats = {"prompt_ids": list(ids), "token_ids": out_ids, "text": "", "reused_tokens": reused,
                 "speculative": spec}
    t0 = time.perf_counter()
    t_first = None
    gen._cached = []
    # Plain steps are launched with overlap: while one is in flight, the next may already be launched with its
    # token copied on the GPU, when the drafter knows it will not draft there (``idle``), as plain decoding does.
    # A step's time: from its launch (or the previous step's collection, when it was launched before that) to
    # its collection. Chained plain steps give the GPU's time a step; a verification's over it is its cost in
    # plain steps, which the drafter weighs its drafts against.
    clock = StepClock(drafter)
    ticket, kind = gen._launch(ids[reused:], reused, params, seed, 0, [], None, True), "plain"
    pos, base, draft = len(ids), 0, []  # pos: the cache's length once ``ticket`` is done (a plain step's)
    t_launch, chained = time.perf_counter(), False
    step, failed, done = 1, True, False
    try:
        while True:
            nxt = None
            if (kind == "plain" and len(out_ids) + 1 < max_new_tokens and not gen._cancelled
                    and pos < gen.max_seq and hasattr(drafter, "idle") and drafter.idle(history)):
                nxt = gen._launch([0], pos, params, seed, step, [], ticket.outputs["next_token"], True)
                step += 1
                spec["plain_steps"] += 1
            (res,) = await gen.core.collect(ticket)
            seconds = clock.collected(t_launch, kind, chained and t_first is not None)
            if kind == "plain":
                new = [struct.unpack("<i", res.data[:4])[0]]
            else:
                n, token = struct.unpack("<2i", res.data[:8])
                new = draft[:n] + [token]
                pos = base + n + 1  # the step's first input and the accepted drafts are in the cache now
                spec["drafted"] += len(draft)
                spec["accepted"] += n
                spec["verify_steps"] += 1
                if hasattr(drafter, "observe"):
                    drafter.observe(n, len(draft), clock.ratio(seconds))
            if t_first is None:
                t_first = time.perf_counter()
            failed = False  # from here on a stop leaves the cache consistent
            for token in new:
                out_ids.append(token)
                history.append(token)
                text = decoder.push(token)
                gen.stats["text"] += text
                yield token_type(token, text)
                if token == eos or gen._cancelled or len(out_ids) == max_new_tokens:
                    done = True
                    break
            if done:
                break
            failed = True
            if nxt is not None:
                ticket, kind, pos, chained = nxt, "plain", pos + 1, True
                continue
            chained = False
            # history[-1] is not in the cache yet: it is the next step's first input, at position pos
            draft = (await drafter.propose(history))[:max(0, gen.max_seq - pos - 1)]
            if draft:
                t_launch = time.perf_counter()
                ticket, kind, base = gen._launch([history[-1]] + draft, pos, params, seed, step, [], None, False,
                                                 outputs=("verify_result",), verify=draft + [-1]), "verify", pos
            else:
                t_launch = time.perf_counter()
                ticket, kind, pos = gen._launch([history[-1]], pos, params, seed, step, [], None, True), "plain", pos + 1
                spec["plain_steps"] += 1
                spec["waited_steps"] += 1  # launched after its token was read: the GPU waited for the host
            step += 1
    finally:
        # the cache holds every token but the last (the verification wrote the accepted drafts' rows)
        gen._cached = [] if failed else ids + out_ids[:-1]
    gen.stats["text"] += decoder.flush()
    t_end = time.perf_counter()
    n_decode = len(out_ids) - 1
    spec["acceptance_rate"] = spec["accepted"] / spec["drafted"] if spec["drafted"] else None
    # a verification step of k drafts in plain steps, as last measured (None: not measured)
    spec["verify_cost"] = getattr(drafter, "costs", {}).get(k)
    gen.stats.update({
        "ttft_s": t_first - t0,
        "prefill_tok_s": (len(ids) - reused) / (t_first - t0),
        "decode_tok_s": n_decode / (t_end - t_first) if n_decode > 0 and t_end > t_first else None,
        "cancelled": gen._cancelled,
    })


class StepClock:
    """Step times inside one generation: the median of recent plain decode steps' (the time a step; a readback
    may also wait for the step chained after it, so single intervals mislead), kept on the drafter between
    generations, and a verification's time over it."""

    def __init__(self, drafter):
        self.drafter, self.last = drafter, None
        if not hasattr(drafter, "plain_times"):
            drafter.plain_times = []

    def collected(self, t_launch: float, kind: str, chained: bool) -> float:
        """The step just collected took this long (from its launch, or from the previous collection when it
        was launched before that); a plain decode step's time is kept (the last 15; not the prefill's)."""
        now = time.perf_counter()
        seconds = now - (t_launch if self.last is None or not chained else max(t_launch, self.last))
        self.last_was_step, self.last = self.last is not None, now
        if kind == "plain" and self.last_was_step:
            times = self.drafter.plain_times
            times.append(seconds)
            del times[:-15]
        return seconds

    def ratio(self, seconds: float) -> float | None:
        times = sorted(self.drafter.plain_times)
        return seconds / times[len(times) // 2] if len(times) >= 3 and times[len(times) // 2] > 0 else None


__all__ = ["NgramDrafter", "ModelDrafter", "agenerate_speculative", "make_drafter"]
