"""The session core shared by the native and browser runtimes: bind dims, plan buffers, record, read back.

Pipelines and weights are created once per session. Each distinct binding of the symbolic dims gets a
cached plan (buffers, uniform values, bind groups, grids). One run writes the feeds, records one command
buffer (one compute pass, then the output copies), submits it and reads the outputs back.

The session reads the typed manifest (format/schema.py) and is split along its seams: binding feeds
(runtime/feeds.py), planning (runtime/planner.py: a typed ``Plan``, runtime/plan.py) and executing
(runtime/execute.py: submit, a typed ``Ticket``, collect). Control flow (runtime/control_flow.py) and
generation (llm/) drive it through the public methods below.
"""

from __future__ import annotations

from .. import dims as D
from ..dtypes import DTYPES, gpu_nbytes
from ..errors import WebinferError
from ..format.manifest import parse_manifest
from ..format.schema import Manifest, Named, Step, Tensor
from ..format.textures import FORMATS as TEXTURE_FORMATS
from . import control_flow
from .execute import Runner
from .feeds import bind_feeds
from .plan import Plan, Ticket
from .planner import Planner, prod
from .select import choose_program
from .tensor import HostTensor, IOInfo
from .weights import check_weights, upload_weights


class SessionCore:
    def __init__(self, manifest: dict, shaders: list[str], read_shard, device, weights: dict | None = None,
                 kernel_class: str | None = None, spec: Manifest | None = None):
        """``weights``: tensor id -> GPU buffer already holding that weight (the browser's JS loader writes
        shards straight into GPU buffers, so they never pass through Python); ``read_shard`` is then unused.
        ``kernel_class`` forces one of the artifact's programs; by default select.py picks one for ``device``
        (``self.choice`` says which and why). ``shaders``: the sources by index, or a function reading one
        (only the chosen program's are read). ``spec``: the typed manifest when the caller has parsed it
        (``Artifact.spec``), else it is parsed here."""
        self.spec = spec if spec is not None else parse_manifest(manifest, "the manifest")
        self.choice = choose_program(self.spec, device.facts(), kernel_class)
        self.program = self.spec.programs[self.choice.index]  # the typed program this session runs
        self.device = device
        self.tensors: tuple[Tensor, ...] = self.spec.tensors
        self.steps: tuple[Step, ...] = self.program.steps
        self.control = self.program.control  # If/Loop/Scan: runtime/control_flow.py runs them
        self.bounds: dict[str, int] = dict(self.spec.bounds)
        # weights bound as textures (the class's weight_textures): tensor id -> texel format
        self.textures = dict(self.program.textures)
        self.step_pipelines = self._pipelines(shaders if callable(shaders) else shaders.__getitem__)
        self.weights = (upload_weights(device, self.tensors, self.program.weights, self.textures, read_shard)
                        if weights is None else check_weights(self.program.weights, weights))
        self.states = {st.tensor: device.create_buffer(max(4, self._nbytes(st.tensor, prod(self.tensors[st.tensor].capacity))),
                                                       "storage") for st in self.spec.states}
        self.weight_bytes = sum(self._nbytes(tid, prod(self.tensors[tid].shape)) for tid in self.weights)
        self.state_bytes = sum(self._nbytes(tid, prod(self.tensors[tid].capacity)) for tid in self.states)
        self.planner = Planner(device, self.spec, self.program, self.step_pipelines,
                               {**self.weights, **self.states}, self.textures)
        self.runner = Runner(device, self.spec, self.program, self._nbytes)
        self.step_dims = self.planner.step_dims
        self._scalar_readback = None

    def _pipelines(self, shader) -> list:
        """One compute pipeline per step, shared by the steps with the same shader and binding kinds."""
        made, out = {}, []
        for step in self.steps:
            # per binding: False read-only storage, True read-write, a sampleType string a texture
            writes = ([TEXTURE_FORMATS[self.textures[t]][2] if t in self.textures else False for t in step.reads]
                      + [True] * len(step.writes))
            key = (step.shader, tuple(writes), bool(step.uniforms))
            if key not in made:
                made[key] = self._pipeline(shader(step.shader), step, writes)
            out.append(made[key])
        return out

    def _pipeline(self, wgsl: str, step: Step, writes: list):
        """A compute pipeline; a shader the device refuses is named (file, kernel) in one line."""
        label = f"{self.spec.shaders[step.shader].file} ({step.label})"
        try:
            return self.device.create_pipeline(wgsl, writes, bool(step.uniforms), label=label)
        except WebinferError:
            raise
        except Exception as e:  # wgpu's GPUValidationError (naga's report); the browser's come with its next read
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
            first = next((ln for ln in lines if "error" in ln.lower() and ln != "Validation Error"), lines[:1] or [""])
            raise WebinferError(f"{label}: the device refuses the shader: {str(first)[:160]}") from None

    def gpu_bytes(self) -> dict:
        """GPU memory this session holds: weights, KV-cache states, and the cached plans' buffers."""
        plans = sum(p.bytes for p in self.planner.cache.values())
        return {"weights": self.weight_bytes, "states": self.state_bytes, "plans": plans,
                "total": self.weight_bytes + self.state_bytes + plans}

    def plans(self) -> list[Plan]:
        """The plans cached now (at most ``plan_cache.MAX_PLANS``), least recently used first."""
        return list(self.planner.cache.values())

    def release(self) -> None:
        """Destroy every GPU buffer the session holds (weights, states, plans) now, not when garbage collected:
        a page that closes a session gets its GPU memory back. The session is unusable afterwards."""
        scalar = [self._scalar_readback] if self._scalar_readback is not None else []  # control flow's
        for buf in [b for p in self.planner.cache.values() for b in p.owned] + [*self.weights.values(),
                                                                              *self.states.values(), *scalar]:
            self.device.destroy_buffer(buf)
        self._scalar_readback = None
        self.planner.cache.clear()
        self.weights, self.states = {}, {}

    # -- set-up ------------------------------------------------------------------------------------
    def get_inputs(self) -> list[IOInfo]:
        return [self._io(io) for io in self.spec.inputs]

    def get_outputs(self) -> list[IOInfo]:
        return [self._io(io) for io in self.program.outputs]

    def _io(self, io: Named) -> IOInfo:
        t = self.tensors[io.tensor]
        return IOInfo(io.name, t.dtype, [d if isinstance(d, int) else D.json_text(d) for d in t.shape])

    def input_tensor(self, name: str) -> Tensor | None:
        """The table entry of input ``name`` (None when the program has no such input)."""
        return next((self.tensors[io.tensor] for io in self.spec.inputs if io.name == name), None)

    def output_tensor(self, name: str) -> Tensor | None:
        return next((self.tensors[io.tensor] for io in self.program.outputs if io.name == name), None)

    # -- binding feeds, planning -------------------------------------------------------------------
    def bind_feeds(self, feeds: dict, dims: dict | None = None) -> tuple[dict, dict[str, HostTensor]]:
        """Check the feeds against the inputs and bind the symbolic dims; ``dims`` binds those that no fed
        input carries (the KV cache's past length)."""
        return bind_feeds(self.spec, self.program, feeds, dims)

    def plan(self, env: dict) -> Plan:
        """Buffers and bind groups for these dims (runtime/planner.py), cached for the most recent few."""
        return self.planner.plan(env)

    def memory_plan(self, numel: list[int]) -> tuple[dict[int, int], list[int], int]:
        """Slots for inputs and intermediates: (tensor -> slot, slot bytes, naive bytes)."""
        return self.planner.memory_plan(numel)

    def _nbytes(self, tid: int, numel: int) -> int:
        """GPU bytes of tensor ``tid`` at ``numel`` elements (packed types hold several per word)."""
        return gpu_nbytes(self.tensors[tid].dtype, numel)

    # -- running -----------------------------------------------------------------------------------
    def write_inputs(self, plan: Plan, host: dict, skip=()) -> None:
        """The host feeds into the plan's input buffers (those named in ``skip`` come from elsewhere)."""
        self.runner.write_inputs(plan, host, skip)

    def output_copies(self, output_names, plan: Plan, env: dict, readbacks) -> tuple[list[tuple], Ticket]:
        """The copies of the asked outputs into ``readbacks`` at dims ``env``, and the ticket that reads them."""
        return self.runner.output_copies(output_names, plan, env, readbacks)

    def scalar_readback(self):
        """A 4-byte readback buffer, for conditions and trip counts computed on the GPU (made on first use)."""
        if self._scalar_readback is None:
            self._scalar_readback = self.device.create_buffer(4, "readback")
        return self._scalar_readback

    def profile(self, feeds: dict, dims: dict | None = None) -> list[tuple[Step, int]]:
        """Time each kernel of one run with GPU timestamps (devices with ``profile``): [(step, ns)]."""
        env, host = self.bind_feeds(feeds, dims)
        plan = self.plan(env)
        self.write_inputs(plan, host)
        steps = [self.steps[s.index] for s in plan.steps if s.grid is not None]
        return list(zip(steps, self.device.profile(plan.dispatches)))

    async def run_async(self, output_names, feeds: dict, dims: dict | None = None) -> list[HostTensor]:
        if self.control:
            return await control_flow.run(self, output_names, feeds, dims)
        return await self.collect(self.launch(output_names, feeds, dims))

    def launch(self, output_names, feeds: dict, dims: dict | None = None, gpu_inputs: dict | None = None,
               overlap: bool = False) -> Ticket:
        """Submit one run without waiting for it; ``collect(ticket)`` reads its outputs.

        ``gpu_inputs``: input name -> (GPU buffer, bytes) copied into that input on the GPU before the run, in
        place of the feed's data (the feed still gives the shape): a decode step takes the token the previous,
        unfinished step sampled, so the host never waits between steps. ``overlap``: this run may be
        launched before the previous run of the same plan is collected (two readback sets alternate)."""
        if self.control:
            raise WebinferError("this model has control flow (If/Loop/Scan): use run_async, which decides per run")
        env, host = self.bind_feeds(feeds, dims)
        plan = self.plan(env)
        names = self.runner.output_names(output_names)
        copies, ticket = self.runner.output_copies(names, plan, env, self.runner.readbacks(plan, overlap))
        if gpu_inputs:
            self.runner.copy_gpu_inputs(plan, gpu_inputs)
        self.runner.write_inputs(plan, host, skip=gpu_inputs or ())
        self.device.submit(plan.dispatches, copies)
        return ticket

    async def collect(self, ticket: Ticket) -> list[HostTensor]:
        return await self.runner.collect(ticket)


def run_sync(coro):
    """Drive a coroutine that never truly suspends (native reads are synchronous) without an event loop."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise RuntimeError("native run suspended unexpectedly")


__all__ = ["SessionCore", "IOInfo", "run_sync", "DTYPES"]
