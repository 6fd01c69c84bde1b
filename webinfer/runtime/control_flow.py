"""Running a program with If/Loop/Scan (manifest ``control``, written by codegen/kernels/control_flow.py) and
data-dependent dims (kind ``count``, written by ``LowerContext.counted``).

The steps stay one flat list; control entries name ranges of it. The executor walks the steps in order,
collecting dispatches; at an If it dispatches one branch's range, at a loop the body's range once per
iteration. The host only decides: a condition or trip count that is a feed is read from the feed, one
computed on the GPU costs a 4-byte read back (after submitting what was collected). Before writing the
uniforms of steps that depend on a loop's iteration dim (per iteration) or count dim (after the loop), the
collected dispatches are submitted, so each sees the values of its own iteration. A count (the number of
elements NonZero, Unique, NMS or Range found, computed on the GPU) is read back (4 bytes) before the step
that follows its kernels; the steps after it run with its dim set (their grids and uniforms), buffers being
sized at its bound. Standard library only.
"""

from __future__ import annotations

import struct

from .. import dims as D
from ..errors import WebinferError
from ..format.schema import CountEntry, IfEntry, LoopEntry, Scalar
from ..format.steps import check_branch_guards, check_guards, step_runs
from .plan import Dispatch, Plan


def _structured(control) -> list:
    """The If/Loop entries (counts are points, not ranges)."""
    return [c for c in control if not isinstance(c, CountEntry)]


def loop_ranges(control) -> list[tuple[int, int]]:
    """The [start, end) step ranges that run repeatedly (the memory planner keeps their tensors alive)."""
    return [c.body for c in control if isinstance(c, LoopEntry)]


def host_reads(control) -> list[tuple[int, int]]:
    """(tensor, step) pairs where the executor reads a condition or trip count: alive until then."""
    out = [(c.tensor, c.at) for c in control if isinstance(c, CountEntry)]
    for c in _structured(control):
        start, end = _start(c), _end(c)
        scalars = ((c.cond, start),) if isinstance(c, IfEntry) else ((c.cond, start), (c.trip, start),
                                                                     (c.cond_out, end - 1))
        for scalar, at in scalars:
            if scalar is not None and scalar.tensor is not None:
                out.append((scalar.tensor, at))
    return out


def initial_dims(control) -> dict[str, int]:
    """Values of the loop dims while planning: iteration 0, counts at their bound (buffers are sized at the
    bounds anyway; the executor sets the real values as it goes)."""
    env = {c.dim: c.bound for c in control if isinstance(c, CountEntry)}
    for c in control:
        if isinstance(c, LoopEntry):
            env[c.iter] = 0
            if c.count:
                env[c.count] = c.bound
    return env


class Executor:
    """One run's walk over the steps. ``plan`` comes from ``SessionCore.plan`` for ``env`` (with the loop dims)."""

    def __init__(self, core, plan: Plan, env: dict, host: dict):
        self.core, self.plan, self.env, self.host = core, plan, env, host
        self.program, self.planner = core.program, core.planner
        self.steps = self.program.steps
        self.entries = plan.by_index()
        self.pending: list[Dispatch] = []
        self.starts: dict[int, list] = {}
        self.counts: dict[int, list[CountEntry]] = {}
        for c in self.program.control:
            if isinstance(c, CountEntry):
                self.counts.setdefault(c.at, []).append(c)
                continue
            self.starts.setdefault(_start(c), []).append(c)
        for found in self.starts.values():  # the outermost control entry of a start first
            found.sort(key=lambda c: -_end(c))
        self.inputs = {io.tensor: io.name for io in core.spec.inputs}
        self.active: set[int] = set()  # control entries being run (their own range does not start them again)

    async def run(self, lo: int, hi: int) -> None:
        i = lo
        while i < hi:
            for c in self.counts.get(i, []):
                await self.count(c)
            entry = next((c for c in self.starts.get(i, []) if _end(c) <= hi and id(c) not in self.active), None)
            if entry is None:
                self._dispatch(i)
                i += 1
                continue
            self.active.add(id(entry))
            try:
                await (self._if(entry) if isinstance(entry, IfEntry) else self._loop(entry))
            finally:
                self.active.discard(id(entry))
            i = _end(entry)

    def _dispatch(self, i: int) -> None:
        entry = self.entries.get(i)
        if entry is None:
            return
        step = self.steps[i]
        if self.planner.dynamic[i]:
            if not step_runs(step, self.env):
                return
            grid = tuple(D.evaluate(g, self.env) for g in step.grid)
        else:
            grid = entry.grid
            if grid is None:
                return
        if max(grid) > 65535:
            raise WebinferError(f"kernel {step.label} needs {max(grid)} workgroups at these dims")
        self.pending.append(Dispatch(entry.pipeline, entry.bind_group, grid))

    async def _if(self, c: IfEntry) -> None:
        then, other = c.branches
        lo, hi = then if await self._scalar(c.cond) else other
        check_branch_guards(self.program.branch_guards, (lo, hi), self.env)  # what the build assumed for it
        await self.run(lo, hi)

    async def _loop(self, c: LoopEntry) -> None:
        trip = await self._scalar(c.trip) if c.trip else None
        go = bool(await self._scalar(c.cond)) if c.cond else True
        lo, hi = c.body
        t = 0
        while go and (trip is None or t < trip):
            if t >= c.bound:
                raise WebinferError(f"a loop runs more than the {c.bound} iterations this artifact was built for")
            self._set_dims({c.iter: t}, lo, hi)
            await self.run(lo, hi)
            if c.cond_out:
                go = bool(await self._scalar(c.cond_out))
            t += 1
        if c.count:
            self._set_dims({c.count: t}, hi, len(self.steps))

    async def count(self, c: CountEntry) -> None:
        """Read a count computed on the GPU and run the steps after it with its dim set."""
        n = await self._scalar(Scalar(tensor=c.tensor))
        if not 0 <= n <= c.bound:
            raise WebinferError(f"a data-dependent size is {n}, more than the {c.bound} this artifact was built "
                                f"for")
        self._set_dims({c.dim: n}, c.at, len(self.steps))

    def _set_dims(self, values: dict, lo: int, hi: int) -> None:
        """Bind dims and rewrite the uniforms of the steps in [lo, hi) that depend on them (always: the
        buffers may hold another run's last iteration)."""
        changed = set(values)
        self.env.update(values)
        check_guards(self.program.guards, self.env, changed)
        written = set()
        for i in range(lo, hi):
            entry = self.entries.get(i)
            ukey = entry.uniform_key if entry is not None else None
            if ukey is None or ukey in written or not (self.planner.step_dims[i] & changed):
                continue
            self.flush()
            self.core.device.write_buffer(self.plan.uniforms[ukey], 0,
                                          self.planner.uniform_bytes(self.steps[i], self.env))
            written.add(ukey)

    def flush(self) -> None:
        if self.pending:
            self.core.device.submit(self.pending, [])
            self.pending = []

    async def _scalar(self, spec: Scalar) -> int:
        if spec.tensor is None:
            return D.evaluate(spec.dim, self.env)
        tid = spec.tensor
        if tid in self.inputs:  # a feed: the host has it
            return _first(self.host[self.inputs[tid]].tolist())
        self.flush()
        buf = self.core.scalar_readback()
        self.core.device.submit([], [(self.plan.buffer_of(tid), 0, buf, 0, 4)])
        word = await self.core.device.read(buf, 4)
        fmt = {"int32": "<i", "int64": "<i", "float32": "<f"}.get(self.core.tensors[tid].dtype, "<I")
        return _first([struct.unpack(fmt, word[:4])[0]])


def _first(values: list):
    v = values[0]
    return int(v) if not isinstance(v, float) else v


def _start(c) -> int:
    return c.branches[0][0] if isinstance(c, IfEntry) else c.body[0]


def _end(c) -> int:
    return c.branches[1][1] if isinstance(c, IfEntry) else c.body[1]


async def run(core, output_names, feeds: dict, dims: dict | None = None) -> list:
    """One run of a program with control flow: bind, plan, walk the steps, read the outputs."""
    env, host = core.bind_feeds(feeds, dims)
    env.update(initial_dims(core.program.control))
    plan = core.plan(env)
    core.write_inputs(plan, host)
    ex = Executor(core, plan, dict(env), host)
    await ex.run(0, len(ex.steps))
    for c in ex.counts.get(len(ex.steps), []):  # counts only the outputs' shapes use
        await ex.count(c)
    copies, ticket = core.output_copies(output_names, plan, ex.env, plan.readbacks)
    core.device.submit(ex.pending, copies)
    return await core.collect(ticket)
