"""Refuse a kernel whose one invocation would loop 65535 times or more, where no split form exists yet.

llvmpipe (lavapipe) ends an invocation's loops once they ran 65535 iterations together, silently (docs/notes.md):
a MatMul with K = 66000 or a Conv over 300 channels x a 300-tap window came out wrong in every element. A wrong
answer without a word is the worst outcome, so such a build stops with one line; a real GPU would run it but
slowly, one lane walking the whole loop (scripts/audit_long_loops.py lists the families and what they do).
"""

from __future__ import annotations

from .reduce import LOOP_BUDGET


def nested(*counts):
    """Iterations of loops nested in the order given (llvmpipe counts every pass of an inner loop's head):
    c0 + c0 c1 + c0 c1 c2 ...; None when a count is symbolic."""
    if not all(isinstance(c, int) for c in counts):
        return None
    total, run = 0, 1
    for c in counts:
        run *= c
        total += run
    return total


def check_loop(ctx, count, what: str) -> None:
    """Raise ``ctx.unsupported`` when ``count`` (a static trip count per invocation) reaches the limit; a
    symbolic count is not known here and passes."""
    if isinstance(count, int) and count >= LOOP_BUDGET:
        raise ctx.unsupported(f"{what} = {count}: one invocation would loop {count} times, past the 65535 "
                              "iterations a software GPU (lavapipe) runs before stopping silently")
