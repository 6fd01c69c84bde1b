"""Static memory planning: tensors whose lifetimes do not overlap share a GPU buffer.

Greedy by size, as in TFLite's shared-object planner: take tensors from largest to smallest, put each
into an existing buffer ("slot") none of whose tenants is alive at the same time, else open a new slot.
Every tensor starts at offset 0 of its slot, so a dispatch never binds two ranges of one buffer: WebGPU
counts a read-only and a writable binding of the same buffer in one dispatch as a usage conflict even
when the ranges are disjoint. Standard library only (the build's report calls it too).
"""

from __future__ import annotations


def lifetimes(n_tensors: int, steps: list, inputs: list[int], outputs: list[int],
              base: list[int], loops: list | None = None, reads: list | None = None) -> dict[int, list[int]]:
    """[first, last] step index each base tensor is alive; inputs from -1, outputs to len(steps). ``steps``:
    the tensors each step binds (its reads and writes).

    ``loops``: [start, end) step ranges that run repeatedly (loop bodies). A tensor used inside one and also
    outside it lives through the whole range: a body step before its use reruns in the next iteration.
    ``reads``: (tensor, step index) pairs the host reads at that point (a condition, a trip count)."""
    live: dict[int, list[int]] = {}

    def touch(tid: int, at: int) -> None:
        b = base[tid]
        span = live.setdefault(b, [at, at])
        span[0], span[1] = min(span[0], at), max(span[1], at)

    for tid in inputs:
        touch(tid, -1)
    for i, bound in enumerate(steps):
        for tid in bound:
            touch(tid, i)
    for tid in outputs:
        touch(tid, len(steps))
    for tid, at in reads or []:
        touch(tid, at)
    for start, end in sorted(loops or [], key=lambda r: r[0] - r[1]):  # outer ranges first
        for span in live.values():
            if span[0] <= end - 1 and span[1] >= start and (span[0] < start or span[1] > end - 1):
                span[0], span[1] = min(span[0], start), max(span[1], end - 1)
    return live


def plan_slots(sizes: dict[int, int], live: dict[int, list[int]]) -> tuple[dict[int, int], list[int]]:
    """Assign each tensor (id -> bytes) a slot; returns (tensor -> slot, slot sizes)."""
    slot_of: dict[int, int] = {}
    slot_sizes: list[int] = []
    tenants: list[list[tuple[int, int]]] = []
    for tid in sorted(sizes, key=lambda t: (-sizes[t], t)):
        first, last = live.get(tid, [0, 0])
        best = None
        for s, spans in enumerate(tenants):
            if slot_sizes[s] < sizes[tid]:
                continue
            if all(last < a or first > b for a, b in spans) and (best is None or slot_sizes[s] < slot_sizes[best]):
                best = s
        if best is None:
            best = len(slot_sizes)
            slot_sizes.append(sizes[tid])
            tenants.append([])
        tenants[best].append((first, last))
        slot_of[tid] = best
    return slot_of, slot_sizes
