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
from ..format.steps import check_branch_guards, check_guards, step_runs


def _structured(control: list[dict]) -> list[dict]:
    """The If/Loop entries (counts are points, not ranges)."""
    return [c for c in control if c["kind"] != "count"]


def loop_ranges(control: list[dict]) -> list[list[int]]:
    """The [start, end) step ranges that run repeatedly (the memory planner keeps their tensors alive)."""
    return [c["body"] for c in control if c["kind"] == "loop"]


def host_reads(control: list[dict]) -> list[tuple[int, int]]:
    """(tensor, step) pairs where the executor reads a condition or trip count: alive until then."""
    out = [(c["tensor"], c["at"]) for c in control if c["kind"] == "count"]
    for c in _structured(control):
        start, end = c["branches"][0][0] if c["kind"] == "if" else c["body"][0], _end(c)
        for key, at in (("cond", start), ("trip", start), ("cond_out", end - 1)):
            if c.get(key) and "tensor" in c[key]:
                out.append((c[key]["tensor"], at))
    return out


def initial_dims(control: list[dict]) -> dict[str, int]:
    """Values of the loop dims while planning: iteration 0, counts at their bound (buffers are sized at the
    bounds anyway; the executor sets the real values as it goes)."""
    env = {c["dim"]: c["bound"] for c in control if c["kind"] == "count"}
    for c in control:
        if c["kind"] == "loop":
            env[c["iter"]] = 0
            if c["count"]:
                env[c["count"]] = c["bound"]
    return env


class Executor:
    """One run's walk over the steps. ``plan`` comes from ``SessionCore.plan`` for ``env`` (with the loop dims)."""

    def __init__(self, core, plan: dict, env: dict, host: dict):
        self.core, self.plan, self.env, self.host = core, plan, env, host
        self.entries = {e[0]: e for e in plan["entries"]}
        self.pending: list[tuple] = []
        self.starts: dict[int, list[dict]] = {}
        self.counts: dict[int, list[dict]] = {}
        for c in core.control:
            if c["kind"] == "count":
                self.counts.setdefault(c["at"], []).append(c)
                continue
            start = c["branches"][0][0] if c["kind"] == "if" else c["body"][0]
            self.starts.setdefault(start, []).append(c)
        for found in self.starts.values():  # the outermost control entry of a start first
            found.sort(key=lambda c: -_end(c))
        self.inputs = {io["tensor"]: io["name"] for io in core.manifest["inputs"]}
        self.active: set[int] = set()  # control entries being run (their own range does not start them again)

    async def run(self, lo: int, hi: int) -> None:
        i = lo
        while i < hi:
            for c in self.counts.get(i, []):
                await self._count(c)
            entry = next((c for c in self.starts.get(i, []) if _end(c) <= hi and id(c) not in self.active), None)
            if entry is None:
                self._dispatch(i)
                i += 1
                continue
            self.active.add(id(entry))
            try:
                await (self._if(entry) if entry["kind"] == "if" else self._loop(entry))
            finally:
                self.active.discard(id(entry))
            i = _end(entry)

    def _dispatch(self, i: int) -> None:
        entry = self.entries.get(i)
        if entry is None:
            return
        step = self.core.steps[i]
        if self.core._dynamic[i]:
            if not _runs(step, self.env):
                return
            grid = tuple(D.evaluate(g, self.env) for g in step["grid"])
        else:
            grid = entry[3]
            if grid is None:
                return
        if max(grid) > 65535:
            raise WebinferError(f"kernel {step['label']} needs {max(grid)} workgroups at these dims")
        self.pending.append((entry[1], entry[2], grid))

    async def _if(self, c: dict) -> None:
        then, other = c["branches"]
        lo, hi = then if await self._scalar(c["cond"]) else other
        check_branch_guards(self.core.manifest, (lo, hi), self.env)  # what the build assumed for this branch
        await self.run(lo, hi)

    async def _loop(self, c: dict) -> None:
        trip = await self._scalar(c["trip"]) if c["trip"] else None
        go = bool(await self._scalar(c["cond"])) if c["cond"] else True
        lo, hi = c["body"]
        t = 0
        while go and (trip is None or t < trip):
            if t >= c["bound"]:
                raise WebinferError(f"a loop runs more than the {c['bound']} iterations this artifact was built for")
            self._set_dims({c["iter"]: t}, lo, hi)
            await self.run(lo, hi)
            if c["cond_out"]:
                go = bool(await self._scalar(c["cond_out"]))
            t += 1
        if c["count"]:
            self._set_dims({c["count"]: t}, hi, len(self.core.steps))

    async def _count(self, c: dict) -> None:
        """Read a count computed on the GPU and run the steps after it with its dim set."""
        n = await self._scalar({"tensor": c["tensor"]})
        if not 0 <= n <= c["bound"]:
            raise WebinferError(f"a data-dependent size is {n}, more than the {c['bound']} this artifact was built "
                                f"for")
        self._set_dims({c["dim"]: n}, c["at"], len(self.core.steps))

    def _set_dims(self, values: dict, lo: int, hi: int) -> None:
        """Bind dims and rewrite the uniforms of the steps in [lo, hi) that depend on them (always: the
        buffers may hold another run's last iteration)."""
        changed = set(values)
        self.env.update(values)
        check_guards(self.core.manifest, self.env, changed)
        written = set()
        for i in range(lo, hi):
            entry = self.entries.get(i)
            if entry is None or entry[4] is None or entry[4] in written or not (self.core.step_dims[i] & changed):
                continue
            self.flush()
            self.core.device.write_buffer(self.plan["uniforms"][entry[4]], 0,
                                          self.core._uniform_bytes(self.core.steps[i], self.env))
            written.add(entry[4])

    def flush(self) -> None:
        if self.pending:
            self.core.device.submit(self.pending, [])
            self.pending = []

    async def _scalar(self, spec: dict) -> int:
        if "dim" in spec:
            return D.evaluate(spec["dim"], self.env)
        tid = spec["tensor"]
        if tid in self.inputs:  # a feed: the host has it
            return _first(self.host[self.inputs[tid]].tolist())
        self.flush()
        buf = _readback_buffer(self.core)
        src = self.plan["buffers"][self.plan["base"][tid]]
        self.core.device.submit([], [(src, 0, buf, 0, 4)])
        word = await self.core.device.read(buf, 4)
        fmt = {"int32": "<i", "int64": "<i", "float32": "<f"}.get(self.core.tensors[tid]["dtype"], "<I")
        return _first([struct.unpack(fmt, word[:4])[0]])


def _readback_buffer(core):
    """A 4-byte readback buffer per session, for conditions and trip counts computed on the GPU."""
    buf = getattr(core, "_scalar_readback", None)
    if buf is None:
        buf = core._scalar_readback = core.device.create_buffer(4, "readback")
    return buf


def _first(values: list):
    v = values[0]
    return int(v) if not isinstance(v, float) else v


def _end(c: dict) -> int:
    return c["branches"][1][1] if c["kind"] == "if" else c["body"][1]


def _runs(step: dict, env: dict) -> bool:
    return step_runs(step, env)


async def run(core, output_names, feeds: dict, dims: dict | None = None) -> list:
    """One run of a program with control flow: bind, plan, walk the steps, read the outputs."""
    env, host = core.bind_feeds(feeds, dims)
    env.update(initial_dims(core.control))
    plan = core.plan(env)
    core._write_inputs(plan, host)
    ex = Executor(core, plan, dict(env), host)
    await ex.run(0, len(core.steps))
    for c in ex.counts.get(len(core.steps), []):  # counts only the outputs' shapes use
        await ex._count(c)
    outputs = {io["name"]: io for io in core.manifest["outputs"]}
    names = list(output_names) if output_names else list(outputs)
    for n in names:
        if n not in outputs:
            raise WebinferError(f"unknown output {n!r} (the model's outputs: {', '.join(outputs)})")
    copies, shapes, sources = [], {}, {}
    for n in names:
        tid = outputs[n]["tensor"]
        shapes[n] = [D.evaluate(d, ex.env) for d in core.tensors[tid]["shape"]]
        sources[n] = plan["buffers"][plan["base"][tid]]
        count = 1
        for d in shapes[n]:
            count *= d
        copies.append((sources[n], 0, plan["readbacks"][n][0], 0, max(4, core._nbytes(tid, count))))
    core.device.submit(ex.pending, copies)
    return await core.collect({"names": names, "shapes": shapes, "readbacks": plan["readbacks"], "outputs": sources})
