"""What a program's steps and guards mean at given dims, shared by the runtime (which dispatches the steps),
its control flow (which sets loop and count dims as it goes) and the build report (which counts dispatches).
They read the typed manifest (format/schema.py). Standard library only."""

from __future__ import annotations

from .. import dims as D
from ..errors import WebinferError
from .schema import BranchGuard, Guard, Manifest, Program, Step


def check_dims(manifest: Manifest, program: Program, env: dict) -> None:
    """Refuse dims beyond a bound (buffers were sized for it) or that break a guard of the build (an assumption
    such as a slice start inside its axis, or a --dim lower bound), naming the dim and the bound."""
    for name, bound in manifest.bounds.items():
        if env.get(name, 0) > bound:
            how = "--max-seq" if manifest.states else f"a larger --dim {name}=LO..HI"
            raise WebinferError(f"dim {name!r} = {env[name]} exceeds the bound {bound} this artifact was built for "
                                f"(rebuild with {how})")
    check_guards(program.guards, env)


def check_guards(guards: tuple[Guard, ...], env: dict, only: set | None = None) -> None:
    """The build's guards on ``env``. One on a dim the run sets later (a loop's iteration, a counted size) waits
    for it: runtime/control_flow.py checks the guards naming the dims it sets (``only``) when it sets them."""
    for g in guards:
        if only is None or D.names(D.from_json(g.expr)) & only:
            _check(g.expr, g.why, env)


def check_branch_guards(branch_guards: tuple[BranchGuard, ...] | None, steps: tuple[int, int], env: dict) -> None:
    """The guards of the If branch whose steps are ``steps`` (manifest ``branch_guards``), checked when that
    branch is about to run: the build relied on them for its steps only."""
    for g in branch_guards or ():
        if tuple(g.steps) == tuple(steps):
            _check(g.expr, g.why, env)


def _check(expr, why: str, env: dict) -> None:
    used = D.names(D.from_json(expr))
    if used <= env.keys() and D.evaluate(expr, env) < 0:
        values = ", ".join(f"{n}={env[n]}" for n in sorted(used))
        raise WebinferError(f"input dims {values} are outside what this artifact was built for: {why}")


def step_dims(step: Step) -> set[str]:
    """The dim names a step's grid, uniforms or condition depend on."""
    exprs = list(step.grid) + [u.value for u in step.uniforms]
    if step.when is not None:
        exprs.append(step.when.dim)
    names: set[str] = set()
    for e in exprs:
        names |= D.names(D.from_json(e))
    return names


def step_runs(step: Step, env: dict) -> bool:
    """Whether a step dispatches at these dims: its ``when`` condition holds and its grid is not empty."""
    when = step.when
    if when is not None and (D.evaluate(when.dim, env) == when.value) != (when.op == "eq"):
        return False
    grid = [D.evaluate(g, env) for g in step.grid]
    if min(grid) < 0:
        raise WebinferError(f"kernel {step.label} has a negative grid {grid} at these dims")
    return min(grid) > 0
