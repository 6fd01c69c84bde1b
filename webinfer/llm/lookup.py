"""Prompt-lookup drafts (n-gram speculation) that pay for themselves. Standard library only (Pyodide too).

A draft is the continuation of the latest earlier occurrence of the longest suffix of the history (prompt +
output) that occurred before. It is worth a verification step only when enough of it is accepted: a step of
k + 1 rows costs some plain steps (measured by the decoding loop as it goes; SmolLM2-135M on a loaded lavapipe:
2-4, and 7-12 before stop 36's GEMM fix), so it gains only when accepted + 1 exceeds that cost. As llama.cpp's
and vLLM's lookup decoding, it adapts (``adaptive=False`` keeps the exact idle rule and the pauses only):

- the match must be long enough: ``need`` tokens (from ``min_ngram``), one more after each verification that
  lost time, one less after each that gained (a copy in progress matches long, paraphrase matches short);
- a losing verification pauses drafting for 1, 2, 4, ... up to 32 steps, and a step where a match is possible
  but has rarely come lately does not wait for its token to look (``idle``): such steps are chained on the GPU
  like plain decoding's, so text the model does not copy costs about nothing;
- an adaptive length, where a short draft's step is measured cheaper (by SHORT_SAVES) than a long one's:
  ``short`` tokens after a verification that accepted fewer than that, back to ``k`` after one that accepted
  its whole draft (two lengths: each is a step shape, planned once). The software classes' few-rows matmul
  (codegen/kernels/quant_rows.py) costs the same for 2..8 rows: there drafts stay ``k`` long;
- where no draft can pay (a verification costs more plain steps than it has rows), no drafts but a rare probe.
"""

from __future__ import annotations

# a verification's cost in plain steps until the loop has measured it (SmolLM2-135M int4 on lavapipe, an 8-row
# step with the few-rows matmul: 2.6-2.9 plain steps of GPU time, plus the host's turn before it)
DEFAULT_COST = 3.0
# A short draft is used only where its verification was measured to cost this fraction of a long one's or less.
SHORT_SAVES = 0.8
# Where even a wholly accepted draft costs more than it gains (every measured length's cost >= length + 1: an
# 8-row step on a loaded lavapipe costs 5-9 plain ones), drafting stops but for one probe every this many
# steps, which measures the cost again (the machine's load changes).
PROBE_EVERY = 256
# The longest pause after losing verifications in a row (1, 2, 4, ... steps): text the model paraphrases rather
# than copies (SmolLM2 adding docstrings to code: acceptance 0.22) keeps offering matches that lose.
MAX_PAUSE = 32


class NgramDrafter:
    """Prompt lookup: copy what followed the longest matching suffix the previous time it occurred.
    ``k``: the longest draft; ``min_ngram``: the shortest match that drafts (3: SmolLM2's first 2-token matches
    in ordinary answers were rejected); ``max_ngram``: the longest looked for."""

    def __init__(self, k: int, max_ngram: int = 8, min_ngram: int = 3, adaptive: bool = True):
        self.k, self.max_ngram, self.min_ngram, self.adaptive = k, max(max_ngram, min_ngram), min_ngram, adaptive
        self.short = min(k, 3)
        self.costs: dict[int, float] = {}  # draft length -> its verification step's time over a plain step's
        self.since = 0  # steps since the last verification (across generations: the probe's clock)
        self.warm: set[int] = set()  # draft lengths verified once (their first time is not a cost sample)
        self.reset()

    def hopeless(self) -> bool:
        """The longest draft, measured, costs at least its rows in plain steps, and no probe is due. (Only the
        longest decides: a step's cost grows more slowly than its rows, so a short draft that cannot pay says
        nothing of a long one; a quiet lavapipe's 4-row step cost 5 plain ones.)"""
        return self.adaptive and self.costs.get(self.k, 0.0) >= self.k + 1 and self.since < PROBE_EVERY

    def reset(self) -> None:
        """A new generation: thresholds back to their start (the measured costs are the machine's: they stay)."""
        self.skip = self.backoff = 0
        self.need, self.length = self.min_ngram, self.k
        self.hit, self.pending = 0.5, False  # how often a possible match was extended by the next token

    def observe(self, accepted: int, drafted: int, cost: float | None = None) -> None:
        """After a verification of ``drafted`` tokens that accepted ``accepted``; ``cost``: that step's time over
        a plain step's, when the loop measured it."""
        self.since = 0
        if drafted not in self.warm:  # a step shape's first run builds its plan and compiles its pipelines
            self.warm.add(drafted)
            cost = None
        if cost is not None and cost > 0:
            old = self.costs.get(drafted)
            self.costs[drafted] = cost if old is None else 0.7 * old + 0.3 * cost
        if accepted + 1 < self.costs.get(drafted, DEFAULT_COST):  # it gained fewer tokens than the steps it cost
            self.backoff = min(MAX_PAUSE, max(1, 2 * self.backoff))
            self.skip = self.backoff
            if self.adaptive:
                self.need = min(self.max_ngram, self.need + 1)
        else:
            self.backoff = 0
            if self.adaptive:
                self.need = max(self.min_ngram, self.need - 1)
        if self.adaptive:
            self.length = self.k if accepted >= drafted else self.short if accepted < self.short else self.length
            short, long = self.costs.get(self.short), self.costs.get(self.k)
            if short is None or long is None or short > SHORT_SAVES * long or short >= self.short + 1:
                self.length = self.k  # a short draft saves nothing (or cannot pay even when accepted)

    def idle(self, history: list[int]) -> bool:
        """Known before the next token is read: no draft will follow it, so the next plain step may be chained
        on the GPU (launched before this one is read). True on a back-off step (consumed here); when the last
        need - 1 tokens never occurred before with a token after them (no match of ``need`` tokens can end
        with the next one); and when such a match is possible but has rarely followed lately (``hit``: waiting
        for a token costs the GPU a gap, which only drafts that happen repay)."""
        if self.pending:  # the last call's possible match: did the token that came extend it?
            self.pending = False
            self.hit = 0.75 * self.hit + 0.25 * (_longest_match(history, self.need)[0] >= self.need)
        if self.skip > 0:
            self.skip -= 1
        elif not (self.hopeless() or self.need >= 2 and _longest_match(history, self.need - 1)[0] < self.need - 1):
            self.pending = self.adaptive
            if not self.adaptive or self.hit >= 0.5:
                return False  # (propose counts this step)
        self.since += 1
        return True

    async def propose(self, history: list[int]) -> list[int]:
        self.since += 1
        if self.skip > 0:
            self.skip -= 1
            return []
        if self.hopeless():
            self.pending = False
            return []
        n, end = _longest_match(history, self.max_ngram)
        if self.pending:
            self.pending = False
            self.hit = 0.75 * self.hit + 0.25 * (n >= self.need)
        if n < max(self.need, 1):
            return []
        follow = history[end + 1:end + 1 + self.length]
        # always ``length`` tokens (one plan per step shape): a short continuation repeats its last token
        return follow + [follow[-1]] * (self.length - len(follow))


def _longest_match(history: list[int], cap: int) -> tuple[int, int]:
    """(n, j): the longest suffix of ``history`` (at most ``cap`` tokens) that also ends at an earlier index j
    with a token after it (j < len - 1), the latest such j on ties; (0, -1) when none."""
    h = len(history)
    if h < 2 or cap < 1:
        return 0, -1
    last, best, where = history[-1], 0, -1
    for j in range(h - 2, -1, -1):
        if history[j] != last:
            continue
        n = 1
        while n < cap and n <= j and history[j - n] == history[h - 1 - n]:
            n += 1
        if n > best:
            best, where = n, j
            if n == cap:
                break
    return best, where
