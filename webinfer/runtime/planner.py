"""Planning: for one binding of the symbolic dims, the memory plan (runtime/memory.py), the buffers it
allocates, the bind groups and the packed uniforms, as a typed :class:`Plan` (runtime/plan.py); and per run,
the grids (and the uniforms of steps on bound dims) for that run's dims. Reads the typed manifest. Standard
library only (runs in Pyodide)."""

from __future__ import annotations

import struct

from .. import dims as D
from ..dtypes import gpu_nbytes
from ..errors import WebinferError
from ..format.schema import LoopEntry, Manifest, Program, Step
from ..format.steps import step_dims, step_runs
from .branches import cannot_run, left_out
from .control_flow import host_reads, loop_ranges
from .feeds import shape_text
from .memory import lifetimes, plan_slots
from .plan import Dispatch, Plan, PlannedStep, Readback
from .plan_cache import PlanCache, SizeCheck, plan_key
from .views import binding, check_bindings, check_view

_PACK = {"u32": "I", "i32": "i", "f32": "f"}
_RANGES = {"u32": (0, 2**32 - 1), "i32": (-(2**31), 2**31 - 1), "f32": (-(2**24), 2**24)}  # f32: exact integers


class Planner:
    """Plans of one program on one device, cached for the most recent few bindings (``PlanCache``).

    ``pipelines``: one per step; ``resident``: tensor -> buffer of what lives across plans (weights, states);
    ``textures``: the weights bound as textures."""

    def __init__(self, device, spec: Manifest, program: Program, pipelines: list, resident: dict, textures: dict):
        self.device, self.spec, self.program = device, spec, program
        self.tensors, self.steps = spec.tensors, program.steps
        self.pipelines, self.resident, self.textures = pipelines, resident, textures
        self.bounds: dict[str, int] = dict(spec.bounds)
        self.step_dims = [step_dims(step) for step in self.steps]
        self.dynamic = [bool(dims & set(self.bounds)) for dims in self.step_dims]  # grids/uniforms on bound dims
        self.grid_keys = [repr((s.grid, s.when)) for s in self.steps]  # many layers share their grid expressions
        self.base = [spec.base(tid) for tid in range(len(self.tensors))]
        self.cache = PlanCache(device)
        self._size_check = SizeCheck([numel_expr(t.shape) for t in self.tensors], self.bounds)
        self._ranged = ranged_tensors(self._size_check.tensors, program.control)
        self._live = None  # lifetimes: the same for every binding

    def plan(self, env: dict) -> Plan:
        """Bound dims (the KV cache's lengths, --dim name=lo..hi) are sized at their maximum and left out of the
        cache key: one plan serves every value, and the steps that depend on a bound dim get their grid and
        uniforms refreshed per run (``refresh``)."""
        key = plan_key(env, self.bounds) + cannot_run(self.program.branch_guards, env)  # (branches.py)
        plan = self.cache.get(key) or self._new_plan(key, dict(env, **self.bounds), env)
        if not self._size_check.fits(plan.numel, env):  # a size the bounds' plan cannot hold: its own plan
            key = tuple(sorted(env.items()))
            plan = self.cache.get(key) or self._new_plan(key, env, env)
        return self.refresh(plan, env)

    def _new_plan(self, key: tuple, size_env: dict, env: dict) -> Plan:
        self.cache.make_room()
        base = self.base
        numel = [D.evaluate(numel_expr(t.shape), size_env) for t in self.tensors]
        for tid, (expr, it) in self._ranged.items():  # most elements over the loop's iterations
            numel[tid] = largest(expr, size_env, it)
        skip, unused = left_out(self.spec, self.program, base, env)  # only If branches that cannot run use
        numel = [0 if tid in unused else n for tid, n in enumerate(numel)]
        self._check_sizes(numel, size_env, unused)
        check_bindings(self.tensors, self.steps, numel, self.device.limits.get("max-storage-buffer-binding-size", 1 << 27),
                       skip, self.textures)
        buffers, owned, slot_bytes = self._allocate(numel)
        steps, ubytes = [], 0
        shared: dict[str, object] = {}  # steps with the same uniform expressions share one buffer
        for i, (step, pipeline) in enumerate(zip(self.steps, self.pipelines)):
            if i in skip or (not self.dynamic[i] and not step_runs(step, env)):
                continue
            binds = [("texture", buffers[tid]) if tid in self.textures else
                     binding(self.tensors, buffers, base, numel, tid, size_env) for tid in step.reads + step.writes]
            ukey = None
            if step.uniforms:
                ukey = repr(step.uniforms)
                data = self.uniform_bytes(step, env)
                if ukey not in shared:
                    shared[ukey] = self.device.create_buffer(len(data), "uniform")
                    ubytes += len(data)
                    self.device.write_buffer(shared[ukey], 0, data)
                    owned.append(shared[ukey])
                binds.append((shared[ukey], 0, len(data)))
            steps.append(PlannedStep(i, pipeline, self.device.create_bind_group(pipeline, binds), ukey))
        readbacks = {}
        for io in self.program.outputs:
            size = max(4, self.nbytes(io.tensor, numel[io.tensor]))
            readbacks[io.name] = Readback(self.device.create_buffer(size, "readback"), size)
            owned.append(readbacks[io.name].buffer)
        nbytes = slot_bytes + ubytes + sum(max(16, (r.size + 15) // 16 * 16) for r in readbacks.values())
        plan = Plan(buffers, base, numel, steps, readbacks, owned, nbytes, shared)
        self.cache.put(key, plan)
        return plan

    def _check_sizes(self, numel: list[int], env: dict, unused: set = frozenset()) -> None:
        """Sizes at these dims: no negative dim, no buffer past the device's maximum, no view past its tensor."""
        limit = self.device.limits.get("max-buffer-size", 1 << 28)
        base = self.base
        for tid, n in enumerate(numel):
            t = self.tensors[tid]
            if tid in unused:
                continue
            it = self._ranged[tid][1] if tid in self._ranged else None
            if n < 0 or any((D.evaluate(d, env) if it is None else largest(d, env, it)) < 0 for d in t.shape):
                raise WebinferError(f"tensor {tid} has a negative dim at these dims ({shape_text(t.shape)})")
            if self.nbytes(tid, n) > limit:
                raise WebinferError(f"tensor {tid} needs {self.nbytes(tid, n)} bytes at these dims, more than "
                                    f"this device's largest buffer ({limit})")
            if base[tid] != tid and tid in self._ranged:  # inside its base at each iteration where it is not empty
                expr, it = self._ranged[tid]
                for i in range(int(env[it]) + 1):
                    at = dict(env, **{it: i})
                    if D.evaluate(expr, at) > 0:
                        check_view(self.tensors, tid, base[tid], {**dict(enumerate(numel)), tid: D.evaluate(expr, at)}, at)
            elif base[tid] != tid:
                check_view(self.tensors, tid, base[tid], numel, env)

    def uniform_bytes(self, step: Step, env: dict) -> bytes:
        """A step's uniform block at these dims (each value checked against its type's range)."""
        values = [D.evaluate(u.value, env) for u in step.uniforms]
        for u, v in zip(step.uniforms, values):
            lo, hi = _RANGES[u.type]
            if not lo <= v <= hi:
                raise WebinferError(f"kernel {step.label}: uniform {u.name} = {v} does not fit {u.type} at these dims")
        data = struct.pack("<" + "".join(_PACK[u.type] for u in step.uniforms), *values)
        return data + b"\0" * ((-len(data)) % 16)

    def refresh(self, plan: Plan, env: dict) -> Plan:
        """Grids (and, for steps that depend on bound dims, uniforms) for this run's dims."""
        if plan.env == env:
            return plan
        first = plan.env is None
        dispatches, grids, written = [], {}, set()
        for ps in plan.steps:
            i = ps.index
            if self.dynamic[i] or first:
                step = self.steps[i]
                gkey = self.grid_keys[i]
                if gkey not in grids:
                    grids[gkey] = tuple(D.evaluate(g, env) for g in step.grid) if step_runs(step, env) else None
                grid = grids[gkey]
                if grid != ps.grid or ps.dispatch is None:
                    ps.grid = grid
                    ps.dispatch = None if grid is None else Dispatch(ps.pipeline, ps.bind_group, grid)
                if grid is None:
                    continue
                if max(grid) > 65535:
                    raise WebinferError(f"kernel {step.label} needs {max(grid)} workgroups at these dims")
                ukey = ps.uniform_key
                if ukey is not None and self.dynamic[i] and not first and ukey not in written:
                    self.device.write_buffer(plan.uniforms[ukey], 0, self.uniform_bytes(step, env))
                    written.add(ukey)
            if ps.dispatch is not None:
                dispatches.append(ps.dispatch)
        plan.dispatches, plan.env = dispatches, dict(env)
        return plan

    def memory_plan(self, numel: list[int]) -> tuple[dict[int, int], list[int], int]:
        """Slots for inputs and intermediates: (tensor -> slot, slot bytes, naive bytes)."""
        if self._live is None:
            control = self.program.control
            self._live = lifetimes(len(self.tensors), [s.reads + s.writes for s in self.steps],
                                   [io.tensor for io in self.spec.inputs], [io.tensor for io in self.program.outputs],
                                   self.base, loop_ranges(control), host_reads(control))
        live = self._live
        sizes = {tid: max(4, self.nbytes(tid, numel[tid])) for tid, t in enumerate(self.tensors)  # this program's
                 if t.kind in ("input", "temp") and t.alias is None and tid in live}
        slot_of, slot_sizes = plan_slots(sizes, live)
        return slot_of, slot_sizes, sum(sizes.values())

    def _allocate(self, numel: list[int]) -> tuple[dict, list, int]:
        slot_of, slot_sizes, _ = self.memory_plan(numel)
        slots = [self.device.create_buffer(size, "storage") for size in slot_sizes]
        buffers: dict[int, object] = dict(self.resident)
        buffers.update({tid: slots[slot] for tid, slot in slot_of.items()})
        return buffers, list(slots), sum(slot_sizes)

    def nbytes(self, tid: int, numel: int) -> int:
        """GPU bytes of tensor ``tid`` at ``numel`` elements (packed types hold several per word)."""
        return gpu_nbytes(self.tensors[tid].dtype, numel)


def ranged_tensors(nonmonotonic: list, control) -> dict[int, tuple]:
    """tensor -> (element count, iteration dim) for the counts that depend on one loop's iteration dim without
    being monotonic in it: Paddle's ``x[:, i:min(n, i + 1)]`` in a loop of up to 1024 iterations has
    ``min(n, i + 1) - i`` elements, 1 while ``i < n`` and negative at the bound, where the other dims are sized."""
    iters = {c.iter for c in control if isinstance(c, LoopEntry) and c.iter}
    out = {}
    for tid, n in nonmonotonic:
        names = D.names(D.from_json(n)) & iters
        if len(names) == 1:
            out[tid] = (n, names.pop())
    return out


def largest(expr, env: dict, it: str) -> int:
    """The largest value of a serialised dim over the iteration dim's range [0, its bound in ``env``]."""
    return max(D.evaluate(expr, dict(env, **{it: i})) for i in range(int(env[it]) + 1))


def numel_expr(shape):
    """The element count of a manifest tensor's shape, as a serialised dim expression."""
    if not shape:
        return 1
    return ["*", 1] + list(shape) if any(not isinstance(d, int) for d in shape) else prod(shape)


def prod(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
