"""Which cached plan serves a run: plans are keyed by the dims that are not bounded, the least recently used
is dropped (its buffers destroyed) beyond a limit, and a plan sized at the bounds is checked to hold the
run's tensors when a size is not monotonic in the dims. Standard library only (runs in Pyodide)."""

from __future__ import annotations

from collections import OrderedDict

from .. import dims as D
from .plan import Plan

MAX_PLANS = 4


class PlanCache:
    """At most ``limit`` plans (runtime/plan.py) for recent dims; the least recently used goes first."""

    def __init__(self, device, limit: int = MAX_PLANS):
        self.device, self.limit = device, limit
        self._plans: OrderedDict[tuple, Plan] = OrderedDict()

    def get(self, key: tuple) -> Plan | None:
        plan = self._plans.get(key)
        if plan is not None:
            self._plans.move_to_end(key)
        return plan

    def make_room(self) -> None:
        """Drop least recently used plans until one more fits."""
        while len(self._plans) >= self.limit:
            _, old = self._plans.popitem(last=False)
            for buf in old.owned:
                self.device.destroy_buffer(buf)

    def put(self, key: tuple, plan: Plan) -> None:
        self._plans[key] = plan

    def values(self):
        return self._plans.values()

    def clear(self) -> None:
        """Forget every plan (their buffers are the caller's to destroy: SessionCore.release)."""
        self._plans.clear()

    def __len__(self) -> int:
        return len(self._plans)

    def __contains__(self, key: tuple) -> bool:
        return key in self._plans


def plan_key(env: dict, bounds: dict) -> tuple:
    """Bounded dims are left out: buffers are sized at the bound, one plan serves all their values."""
    return tuple(sorted((k, v) for k, v in env.items() if k not in bounds))


def monotonic(j) -> bool:
    """Whether a serialised dim can only grow with its names (so a buffer sized at the bound fits every smaller
    value): sums and products with non-negative coefficients of names, floor divisions by a positive
    constant, min and max of such. ``%`` and negative terms are not."""
    if isinstance(j, (int, str)):
        return True
    op = j[0]
    if op == "+":
        return all(monotonic(t) for t in j[1:])
    if op == "*":
        return len(j) == 2 or (j[1] >= 0 and all(monotonic(f) for f in j[2:]))
    if op == "//":
        return monotonic(j[1]) and isinstance(j[2], int) and j[2] > 0
    if op in ("max", "min"):
        return monotonic(j[1]) and monotonic(j[2])
    return False


class SizeCheck:
    """The tensors whose element count depends on a bounded dim without being monotonic in it: a plan sized
    at the bounds is checked to hold them at the run's dims (else the run gets a plan of its own)."""

    def __init__(self, numels: list, bounds: dict):
        self.tensors = []
        if bounds:
            for tid, n in enumerate(numels):
                if not isinstance(n, int) and D.names(D.from_json(n)) & set(bounds) and not monotonic(n):
                    self.tensors.append((tid, n))

    def fits(self, planned: list[int], env: dict) -> bool:
        return all(D.evaluate(n, env) <= planned[tid] for tid, n in self.tensors)
