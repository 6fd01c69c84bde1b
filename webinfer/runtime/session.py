"""The session core shared by the native and browser runtimes: bind dims, plan buffers, record, read back.

Pipelines and weights are created once per session. Each distinct binding of the symbolic dims gets a
cached plan (buffers, uniform values, bind groups, grids). One run writes the feeds, records one command
buffer (one compute pass, then the output copies), submits it and reads the outputs back.
"""

from __future__ import annotations

import struct

from .. import dims as D
from ..artifact import program_view
from ..dtypes import DTYPES, gpu_nbytes
from ..errors import WebinferError
from ..format.steps import check_dims, step_dims, step_runs
from ..format.textures import FORMATS as TEXTURE_FORMATS
from . import control_flow
from .branches import cannot_run, left_out
from .control_flow import host_reads, loop_ranges
from .memory import lifetimes, plan_slots
from .plan_cache import PlanCache, SizeCheck, plan_key
from .select import choose_program
from .tensor import HostTensor, IOInfo, as_host, check_index_bounds, from_gpu_bytes, to_gpu_bytes
from .views import binding, check_bindings, check_view
from .weights import check_weights, upload_weights

_PACK = {"u32": "I", "i32": "i", "f32": "f"}
_RANGES = {"u32": (0, 2**32 - 1), "i32": (-(2**31), 2**31 - 1), "f32": (-(2**24), 2**24)}  # f32: exact integers


class SessionCore:
    def __init__(self, manifest: dict, shaders: list[str], read_shard, device, weights: dict | None = None,
                 kernel_class: str | None = None):
        """``weights``: tensor id -> GPU buffer already holding that weight (the browser's JS loader writes
        shards straight into GPU buffers, so they never pass through Python); ``read_shard`` is then unused.
        ``kernel_class`` forces one of the artifact's programs; by default select.py picks one for ``device``
        (``self.choice`` says which and why). ``shaders``: the sources by index, or a function reading one
        (only the chosen program's are read)."""
        self.choice = choose_program(manifest, device.facts(), kernel_class)
        manifest = program_view(manifest, self.choice.index)
        self.manifest = manifest
        self.device = device
        self.tensors = manifest["tensors"]
        self.steps = manifest["steps"]
        # weights bound as textures (the class's weight_textures): tensor id -> texel format
        self.textures = {tid: fmt for tid, fmt in manifest["program"].get("textures", [])}
        self._pipelines = {}
        self.step_pipelines = []
        shader = shaders if callable(shaders) else shaders.__getitem__  # a list, or a reader by index
        for step in self.steps:
            # per binding: False read-only storage, True read-write, a sampleType string a texture
            writes = ([TEXTURE_FORMATS[self.textures[t]][2] if t in self.textures else False for t in step["reads"]]
                      + [True] * len(step["writes"]))
            key = (step["shader"], tuple(writes), bool(step["uniforms"]))
            if key not in self._pipelines:
                self._pipelines[key] = self._pipeline(shader(step["shader"]), step, writes)
            self.step_pipelines.append(self._pipelines[key])
        self.weights = (upload_weights(device, self.tensors, self.manifest["program"]["weights"], self.textures,
                                       read_shard) if weights is None
                        else check_weights(self.manifest["program"]["weights"], weights))
        self.bounds: dict[str, int] = dict(manifest.get("bounds", {}))
        self.states = {}
        for st in manifest.get("states", []):
            cap = self.tensors[st["tensor"]]["capacity"]
            self.states[st["tensor"]] = device.create_buffer(max(4, self._nbytes(st["tensor"], _prod(cap))), "storage")
        self.control = manifest.get("control") or []  # If/Loop/Scan: runtime/control_flow.py runs them
        self.step_dims = [step_dims(step) for step in self.steps]
        self._dynamic = [bool(dims & set(self.bounds)) for dims in self.step_dims]
        self._input_tensor = {io["name"]: io["tensor"] for io in manifest["inputs"]}
        self.weight_bytes = sum(self._nbytes(tid, _prod(self.tensors[tid]["shape"])) for tid in self.weights)
        self.state_bytes = sum(self._nbytes(tid, _prod(self.tensors[tid]["capacity"])) for tid in self.states)
        self._plans = PlanCache(device)
        self._size_check = SizeCheck([_numel(t) for t in self.tensors], self.bounds)

    def _pipeline(self, wgsl: str, step: dict, writes: list[bool]):
        """A compute pipeline; a shader the device refuses is named (file, kernel) in one line."""
        label = f"{self.manifest['shaders'][step['shader']]['file']} ({step['label']})"
        try:
            return self.device.create_pipeline(wgsl, writes, bool(step["uniforms"]), label=label)
        except WebinferError:
            raise
        except Exception as e:  # wgpu's GPUValidationError (naga's report); the browser's come with its next read
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
            first = next((ln for ln in lines if "error" in ln.lower() and ln != "Validation Error"), lines[:1] or [""])
            raise WebinferError(f"{label}: the device refuses the shader: {str(first)[:160]}") from None

    def gpu_bytes(self) -> dict:
        """GPU memory this session holds: weights, KV-cache states, and the cached plans' buffers."""
        plans = sum(p["bytes"] for p in self._plans.values())
        return {"weights": self.weight_bytes, "states": self.state_bytes, "plans": plans,
                "total": self.weight_bytes + self.state_bytes + plans}

    def release(self) -> None:
        """Destroy every GPU buffer the session holds (weights, states, plans) now, not when garbage collected:
        a page that closes a session gets its GPU memory back. The session is unusable afterwards."""
        scalar = [self._scalar_readback] if getattr(self, "_scalar_readback", None) else []  # control_flow's
        for buf in [b for p in self._plans.values() for b in p["owned"]] + [*self.weights.values(),
                                                                          *self.states.values(), *scalar]:
            self.device.destroy_buffer(buf)
        self._scalar_readback = None
        self._plans.clear()
        self.weights, self.states = {}, {}

    # -- set-up ------------------------------------------------------------------------------------
    def get_inputs(self) -> list[IOInfo]:
        return [self._io(io) for io in self.manifest["inputs"]]

    def get_outputs(self) -> list[IOInfo]:
        return [self._io(io) for io in self.manifest["outputs"]]

    def _io(self, io: dict) -> IOInfo:
        t = self.tensors[io["tensor"]]
        return IOInfo(io["name"], t["dtype"], [d if isinstance(d, int) else D.json_text(d) for d in t["shape"]])

    # -- binding feeds -----------------------------------------------------------------------------
    def bind_feeds(self, feeds: dict, dims: dict | None = None) -> tuple[dict, dict[str, HostTensor]]:
        """Check the feeds against the inputs and bind the symbolic dims; ``dims`` binds those that no fed
        input carries (the KV cache's past length)."""
        names = {io["name"] for io in self.manifest["inputs"]}
        for name in feeds:
            if name not in names:
                raise WebinferError(f"unknown input {name!r} (the model's inputs: {', '.join(sorted(names))})")
        env: dict[str, int] = {k: int(v) for k, v in (dims or {}).items()}
        host: dict[str, HostTensor] = {}
        for io in self.manifest["inputs"]:
            name, t = io["name"], self.tensors[io["tensor"]]
            if name not in feeds:
                raise WebinferError(f"missing feed for input {name!r}")
            h = as_host(feeds[name], name)
            if h.dtype != t["dtype"]:
                raise WebinferError(f"input {name!r} expects {t['dtype']}, got {h.dtype}")
            if len(h.shape) != len(t["shape"]):
                raise WebinferError(f"input {name!r} expects rank {len(t['shape'])}, got shape {list(h.shape)}")
            for axis, (want, got) in enumerate(zip(t["shape"], h.shape)):
                if isinstance(want, str):
                    if env.setdefault(want, got) != got:
                        raise WebinferError(f"input {name!r} axis {axis}: dim {want!r} is {env[want]} elsewhere, "
                                            f"got {got}")
                elif isinstance(want, int) and want != got:
                    raise WebinferError(f"input {name!r} expects shape {_shape_text(t['shape'])}, "
                                        f"got {list(h.shape)}")
            host[name] = h
        for io in self.manifest["inputs"]:
            t = self.tensors[io["tensor"]]
            for axis, (want, got) in enumerate(zip(t["shape"], host[io["name"]].shape)):
                if not isinstance(want, (int, str)) and D.evaluate(want, env) != got:
                    raise WebinferError(f"input {io['name']!r} axis {axis}: expected {D.evaluate(want, env)}")
        missing = [d for d in self.manifest.get("dims", []) if d not in env]
        if missing:
            raise WebinferError(f"dims {missing} are not bound by any input")
        check_index_bounds(self.manifest.get("index_bounds", {}), host)
        check_dims(self.manifest, self.bounds, env)
        return env, host

    # -- planning ----------------------------------------------------------------------------------
    def plan(self, env: dict) -> dict:
        """Buffers and bind groups for these dims, cached for the most recent few (``PlanCache``). Bound dims
        (the KV cache's lengths, --dim name=lo..hi) are sized at their maximum and left out of the cache key:
        one plan serves every value, and the steps that depend on a bound dim get their grid and uniforms
        refreshed per run (``_refresh``)."""
        key = plan_key(env, self.bounds) + cannot_run(self.manifest, env)  # (If branches left out: branches.py)
        plan = self._plans.get(key) or self._new_plan(key, dict(env, **self.bounds), env)
        if not self._size_check.fits(plan["numel"], env):  # a size the bounds' plan cannot hold: its own plan
            key = tuple(sorted(env.items()))
            plan = self._plans.get(key) or self._new_plan(key, env, env)
        return self._refresh(plan, env)

    def _new_plan(self, key: tuple, size_env: dict, env: dict) -> dict:
        self._plans.make_room()
        numel = [D.evaluate(_numel(t), size_env) for t in self.tensors]
        base = [self._base(tid) for tid in range(len(self.tensors))]
        skip, unused = left_out(self, base, env)  # what only If branches that cannot run at these dims use
        numel = [0 if tid in unused else n for tid, n in enumerate(numel)]
        self._check_sizes(numel, base, size_env, unused)
        check_bindings(self.tensors, self.steps, numel, self.device.limits.get("max-storage-buffer-binding-size", 1 << 27),
                       skip, self.textures)
        buffers, owned = self._allocate(numel, base)
        entries, ubytes = [], 0
        shared: dict[str, object] = {}  # steps with the same uniform expressions share one buffer
        for i, (step, pipeline) in enumerate(zip(self.steps, self.step_pipelines)):
            if i in skip or (not self._dynamic[i] and not step_runs(step, env)):
                continue
            binds = [("texture", buffers[tid]) if tid in self.textures else
                     binding(self.tensors, buffers, base, numel, tid, size_env) for tid in step["reads"] + step["writes"]]
            ukey = None
            if step["uniforms"]:
                ukey = repr(step["uniforms"])
                data = self._uniform_bytes(step, env)
                if ukey not in shared:
                    shared[ukey] = self.device.create_buffer(len(data), "uniform")
                    ubytes += len(data)
                    self.device.write_buffer(shared[ukey], 0, data)
                    owned.append(shared[ukey])
                binds.append((shared[ukey], 0, len(data)))
            entries.append([i, pipeline, self.device.create_bind_group(pipeline, binds), None, ukey])
        readbacks = {}
        for io in self.manifest["outputs"]:
            tid = io["tensor"]
            size = max(4, self._nbytes(tid, numel[tid]))
            readbacks[io["name"]] = (self.device.create_buffer(size, "readback"), size)
            owned.append(readbacks[io["name"]][0])
        nbytes = self.last_plan_bytes + sum(max(16, (n + 15) // 16 * 16) for _, n in readbacks.values())
        nbytes += ubytes
        plan = {"buffers": buffers, "base": base, "numel": numel, "entries": entries, "env": None,
                "readbacks": readbacks, "owned": owned, "bytes": nbytes, "uniforms": shared}
        self._plans.put(key, plan)
        return plan

    def _check_sizes(self, numel: list[int], base: list[int], env: dict, unused: set = frozenset()) -> None:
        """Sizes at these dims: no negative dim, no buffer past the device's maximum, no view past its tensor."""
        limit = self.device.limits.get("max-buffer-size", 1 << 28)
        for tid, n in enumerate(numel):
            t = self.tensors[tid]
            if tid in unused:
                continue
            if n < 0 or any(D.evaluate(d, env) < 0 for d in t["shape"]):
                raise WebinferError(f"tensor {tid} has a negative dim at these dims ({_shape_text(t['shape'])})")
            if self._nbytes(tid, n) > limit:
                raise WebinferError(f"tensor {tid} needs {self._nbytes(tid, n)} bytes at these dims, more than "
                                    f"this device's largest buffer ({limit})")
            if base[tid] != tid:
                check_view(self.tensors, tid, base[tid], numel, env)

    def _uniform_bytes(self, step: dict, env: dict) -> bytes:
        values = [D.evaluate(v, env) for _, _, v in step["uniforms"]]
        for (name, typ, _), v in zip(step["uniforms"], values):
            lo, hi = _RANGES[typ]
            if not lo <= v <= hi:
                raise WebinferError(f"kernel {step['label']}: uniform {name} = {v} does not fit {typ} at these dims")
        data = struct.pack("<" + "".join(_PACK[t] for _, t, _ in step["uniforms"]), *values)
        return data + b"\0" * ((-len(data)) % 16)

    def _refresh(self, plan: dict, env: dict) -> dict:
        """Grids (and, for steps that depend on bound dims, uniforms) for this run's dims."""
        if plan["env"] == env:
            return plan
        first = plan["env"] is None
        dispatches, grids, written = [], {}, set()
        for entry in plan["entries"]:
            i, pipeline, group, grid, ukey = entry
            step = self.steps[i]
            if self._dynamic[i] or first:
                gkey = repr((step["grid"], step.get("when")))
                if gkey not in grids:  # many layers share their grid expressions
                    grids[gkey] = (tuple(D.evaluate(g, env) for g in step["grid"])
                                   if step_runs(step, env) else None)
                entry[3] = grid = grids[gkey]
                if grid is None:
                    continue
                if max(grid) > 65535:
                    raise WebinferError(f"kernel {step['label']} needs {max(grid)} workgroups at these dims")
                if ukey is not None and self._dynamic[i] and not first and ukey not in written:
                    self.device.write_buffer(plan["uniforms"][ukey], 0, self._uniform_bytes(step, env))
                    written.add(ukey)
            if entry[3] is not None:
                dispatches.append((pipeline, group, entry[3]))
        plan["dispatches"], plan["env"] = dispatches, dict(env)
        return plan

    def memory_plan(self, numel: list[int], base: list[int]) -> tuple[dict[int, int], list[int], int]:
        """Slots for inputs and intermediates: (tensor -> slot, slot bytes, naive bytes)."""
        live = lifetimes(len(self.tensors), self.steps, [io["tensor"] for io in self.manifest["inputs"]],
                         [io["tensor"] for io in self.manifest["outputs"]], base, loop_ranges(self.control),
                         host_reads(self.control))
        sizes = {tid: max(4, self._nbytes(tid, numel[tid])) for tid, t in enumerate(self.tensors)  # this program's
                 if t["kind"] in ("input", "temp") and t.get("alias") is None and tid in live}
        slot_of, slot_sizes = plan_slots(sizes, live)
        return slot_of, slot_sizes, sum(sizes.values())

    def _allocate(self, numel: list[int], base: list[int]) -> tuple[dict, list]:
        slot_of, slot_sizes, _ = self.memory_plan(numel, base)
        slots = [self.device.create_buffer(size, "storage") for size in slot_sizes]
        buffers: dict[int, object] = dict(self.weights)
        buffers.update(self.states)
        buffers.update({tid: slots[slot] for tid, slot in slot_of.items()})
        self.last_plan_bytes = sum(slot_sizes)
        return buffers, list(slots)

    def _nbytes(self, tid: int, numel: int) -> int:
        """GPU bytes of tensor ``tid`` at ``numel`` elements (packed types hold several per word)."""
        return gpu_nbytes(self.tensors[tid]["dtype"], numel)

    def _base(self, tid: int) -> int:
        while self.tensors[tid].get("alias") is not None:
            tid = self.tensors[tid]["alias"]
        return tid

    # -- running -----------------------------------------------------------------------------------
    def profile(self, feeds: dict, dims: dict | None = None) -> list[tuple[dict, int]]:
        """Time each kernel of one run with GPU timestamps (devices with ``profile``): [(step, ns)]."""
        env, host = self.bind_feeds(feeds, dims)
        plan = self.plan(env)
        self._write_inputs(plan, host)
        steps = [self.steps[e[0]] for e in plan["entries"] if e[3] is not None]
        return list(zip(steps, self.device.profile(plan["dispatches"])))

    def _write_inputs(self, plan: dict, host: dict, skip=()) -> None:
        for io in self.manifest["inputs"]:
            if io["name"] in skip:
                continue
            data = to_gpu_bytes(host[io["name"]], io["name"])
            if data:
                self.device.write_buffer(plan["buffers"][io["tensor"]], 0, data)

    async def run_async(self, output_names, feeds: dict, dims: dict | None = None) -> list[HostTensor]:
        if self.control:
            return await control_flow.run(self, output_names, feeds, dims)
        return await self.collect(self.launch(output_names, feeds, dims))

    def launch(self, output_names, feeds: dict, dims: dict | None = None, gpu_inputs: dict | None = None,
               overlap: bool = False) -> dict:
        """Submit one run without waiting for it; ``collect(ticket)`` reads its outputs.

        ``gpu_inputs``: input name -> (GPU buffer, bytes) copied into that input on the GPU before the run, in
        place of the feed's data (the feed still gives the shape): a decode step takes the token the previous,
        unfinished step sampled, so the host never waits between steps. ``overlap``: this run may be
        launched before the previous run of the same plan is collected (two readback sets alternate)."""
        if self.control:
            raise WebinferError("this model has control flow (If/Loop/Scan): use run_async, which decides per run")
        env, host = self.bind_feeds(feeds, dims)
        plan = self.plan(env)
        outputs = {io["name"]: io for io in self.manifest["outputs"]}
        names = list(output_names) if output_names else list(outputs)
        for n in names:
            if n not in outputs:
                raise WebinferError(f"unknown output {n!r} (the model's outputs: {', '.join(outputs)})")
        gpu_inputs = gpu_inputs or {}
        # (the planner may have given the source and the input one buffer: the data is then already in place)
        pre = [(src, 0, plan["buffers"][self._input_tensor[name]], 0, nbytes) for name, (src, nbytes)
               in gpu_inputs.items() if src is not plan["buffers"][self._input_tensor[name]]]
        if pre:  # copied first, in a submit of their own: a source (the previous run's output) may share its
            # buffer with an input this run writes from the host, and host writes run before the next submit
            self.device.submit([], [], pre)
        self._write_inputs(plan, host, skip=gpu_inputs)
        readbacks = self._readbacks(plan, overlap)
        copies, shapes, sources = [], {}, {}
        for n in names:
            tid = outputs[n]["tensor"]
            shapes[n] = [D.evaluate(d, env) for d in self.tensors[tid]["shape"]]
            sources[n] = plan["buffers"][plan["base"][tid]]
            copies.append((sources[n], 0, readbacks[n][0], 0, max(4, self._nbytes(tid, _prod(shapes[n])))))
        self.device.submit(plan["dispatches"], copies)
        return {"names": names, "shapes": shapes, "readbacks": readbacks, "outputs": sources}

    def _readbacks(self, plan: dict, overlap: bool) -> dict:
        if not overlap:
            return plan["readbacks"]
        if "readbacks_b" not in plan:  # a second set, made on first use
            plan["readbacks_b"] = {n: (self.device.create_buffer(c, "readback"), c)
                                   for n, (_, c) in plan["readbacks"].items()}
            plan["owned"] += [b for b, _ in plan["readbacks_b"].values()]
        plan["turn"] = not plan.get("turn", False)
        return plan["readbacks_b"] if plan["turn"] else plan["readbacks"]

    async def collect(self, ticket: dict) -> list[HostTensor]:
        outputs = {io["name"]: io for io in self.manifest["outputs"]}
        results = []
        for n in ticket["names"]:
            t = self.tensors[outputs[n]["tensor"]]
            buf, _ = ticket["readbacks"][n]
            count = _prod(ticket["shapes"][n])
            data = await self.device.read(buf, self._nbytes(outputs[n]["tensor"], count))
            results.append(HostTensor(t["dtype"], ticket["shapes"][n], from_gpu_bytes(t["dtype"], data, count)))
        return results


def _numel(t: dict):
    """The element count of a manifest tensor, as a serialised dim expression."""
    shape = t["shape"]
    if not shape:
        return 1
    return ["*", 1] + list(shape) if any(not isinstance(d, int) for d in shape) else _prod(shape)


def _prod(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _shape_text(shape) -> str:
    return "[" + ", ".join(str(d) if isinstance(d, (int, str)) else "?" for d in shape) + "]"


def run_sync(coro):
    """Drive a coroutine that never truly suspends (native reads are synchronous) without an event loop."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise RuntimeError("native run suspended unexpectedly")


__all__ = ["SessionCore", "IOInfo", "run_sync", "DTYPES"]
