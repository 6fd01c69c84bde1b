"""Reading the build's guards (format/schema.py ``Guard``, ``BranchGuard``): assumptions on the dims, the
program's (checked per run) and an If branch's (checked when that branch runs). Standard library only."""

from __future__ import annotations

from .schema import BranchGuard, Guard


def read_guard(r, v, path: str) -> Guard:
    v = r.list(v, path, 2)
    return Guard(r.dim(v[0], f"{path}[0]"), r.str(v[1], f"{path}[1]"))


def read_branch_guards(r, v, path: str) -> tuple[BranchGuard, ...] | None:
    """``[[start, end], expr, why]`` each; None when the program has none (the key is left out)."""
    if v is None:
        return None
    out = []
    for i, g in enumerate(r.list(v, path)):
        g = r.list(g, f"{path}[{i}]", 3)
        steps = r.list(g[0], f"{path}[{i}][0]", 2)
        lo, hi = (r.int(x, f"{path}[{i}][0][{k}]", 0, 2**31 - 1) for k, x in enumerate(steps))
        out.append(BranchGuard((lo, hi), r.dim(g[1], f"{path}[{i}][1]"), r.str(g[2], f"{path}[{i}][2]")))
    return tuple(out)
