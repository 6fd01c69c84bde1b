"""If branches that cannot run at a run's dims (manifest ``branch_guards``, written by codegen/guard_scopes.py).

A branch whose guards fail at these dims was built for other sizes: if the run takes it, the executor refuses it
with the guard's line (runtime/control_flow.py). So the plan leaves it out: its steps get no bind group or
uniforms and the tensors only it uses are not sized, which would otherwise refuse a run that takes the other
branch (Silero's 8 kHz half sized at a 16 kHz chunk) with a size error. Plans are keyed by these branches too.
Standard library only.
"""

from __future__ import annotations

from .. import dims as D
from ..format.schema import BranchGuard, Manifest, Program


def cannot_run(branch_guards: tuple[BranchGuard, ...] | None, env: dict) -> tuple:
    """The step ranges of the If branches whose guards fail at ``env`` (part of the plan's key)."""
    out = set()
    for g in branch_guards or ():
        if D.names(D.from_json(g.expr)) <= env.keys() and D.evaluate(g.expr, env) < 0:
            out.add(tuple(g.steps))
    return tuple(sorted(out))


def left_out(spec: Manifest, program: Program, base: list[int], env: dict) -> tuple[set[int], set[int]]:
    """(steps, tensors) a plan for ``env`` leaves out: the steps of branches that cannot run, and the tensors
    whose storage no other step, input, output or state uses."""
    ranges = cannot_run(program.branch_guards, env)
    if not ranges:
        return set(), set()
    steps = {i for lo, hi in ranges for i in range(lo, hi)}
    used = {base[io.tensor] for io in spec.inputs + program.outputs + spec.states}
    for i, step in enumerate(program.steps):
        if i not in steps:
            used.update(base[t] for t in step.reads + step.writes)
    return steps, {tid for tid in range(len(base)) if base[tid] not in used}
