"""Guards scoped to an If branch: an assumption the build made while lowering a branch the runtime may skip holds
only when that branch runs, so it is recorded with the branch's step range (manifest ``branch_guards``) and
checked by runtime/control_flow.py when the branch is dispatched, not on every run.

A guard recorded in a loop body (or in an If nested in nothing but the main graph) stays a program guard, as
before; so does one naming a dim that control flow sets while running (a loop's iteration, a counted size,
named ``__...`` by the lowerings): those are checked when their dim is set, which happens only when their steps
run anyway.
"""

from __future__ import annotations

from contextlib import contextmanager

from .. import dims as D
from ..dims import Dim


class _Scope:
    def __init__(self, depth: int):
        self.depth = depth  # the Lowerer's region_depth while the branch's own nodes are lowered
        self.guards: list[tuple[Dim, str]] = []


def _scopes(lw) -> list[_Scope]:
    if not hasattr(lw, "guard_scopes"):
        lw.guard_scopes = []
    return lw.guard_scopes


def _innermost(lw) -> _Scope | None:
    """The If branch whose steps are being lowered right now (not a loop body inside it), else None."""
    scopes = _scopes(lw)
    return scopes[-1] if scopes and scopes[-1].depth == lw.region_depth else None


def can_guard(lw) -> bool:
    """Whether a guard recorded now holds exactly when the steps being lowered run: in the main graph (checked
    per run) or directly in an If branch (checked when the branch runs); not in a loop body."""
    return lw.region_depth == 0 or _innermost(lw) is not None


def record(lw, expr: Dim, why: str) -> None:
    """``expr >= 0`` with its reason, in the innermost If branch being lowered, else among the program's guards
    (one guard per condition: the first node's words)."""
    scope = _innermost(lw)
    if scope is None or any(name.startswith("__") for name in D.names(expr)):
        if all(g[0] != expr for g in lw.program.guards):
            lw.program.guards.append((expr, why))
        return
    if all(g[0] != expr for g in lw.program.guards + scope.guards):
        scope.guards.append((expr, why))


@contextmanager
def branch_scope(lw):
    """Collect the guards recorded while one If branch is lowered; ``close(scope, start, end)`` gives them the
    branch's step range once its last step (the copies into the If's outputs) is emitted."""
    scope = _Scope(lw.region_depth + 1)
    _scopes(lw).append(scope)
    try:
        yield scope
    finally:
        _scopes(lw).pop()


def close(lw, scope: _Scope, start: int, end: int) -> None:
    lw.program.branch_guards.extend(((start, end), expr, why) for expr, why in scope.guards)
