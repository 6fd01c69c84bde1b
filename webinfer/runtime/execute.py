"""Executing a plan: the feeds written into their buffers, one submit of the dispatches and the output copies,
and the outputs read back from a typed :class:`Ticket` (runtime/plan.py). Standard library only."""

from __future__ import annotations

from .. import dims as D
from ..errors import WebinferError
from ..format.schema import Manifest, Program
from .plan import Plan, Readback, Ticket
from .planner import prod
from .tensor import HostTensor, from_gpu_bytes, to_gpu_bytes


class Runner:
    """Writes, submits and reads back the runs of one program on one device."""

    def __init__(self, device, spec: Manifest, program: Program, nbytes):
        self.device, self.tensors, self.inputs = device, spec.tensors, spec.inputs
        self.outputs = {io.name: io for io in program.outputs}
        self.input_tensor = {io.name: io.tensor for io in spec.inputs}
        self.nbytes = nbytes  # (tensor, elements) -> GPU bytes

    def write_inputs(self, plan: Plan, host: dict, skip=()) -> None:
        """The host feeds into their buffers (those named in ``skip`` come from elsewhere)."""
        for io in self.inputs:
            if io.name in skip:
                continue
            data = to_gpu_bytes(host[io.name], io.name)
            if data:
                self.device.write_buffer(plan.buffers[io.tensor], 0, data)

    def copy_gpu_inputs(self, plan: Plan, gpu_inputs: dict) -> None:
        """input name -> (GPU buffer, bytes) copied into that input first, in a submit of its own: a source (the
        previous run's output) may share its buffer with an input this run writes from the host, and host
        writes run before the next submit. (The planner may have given the source and the input one buffer:
        the data is then already in place.)"""
        pre = [(src, 0, plan.buffers[self.input_tensor[name]], 0, nbytes) for name, (src, nbytes)
               in gpu_inputs.items() if src is not plan.buffers[self.input_tensor[name]]]
        if pre:
            self.device.submit([], [], pre)

    def readbacks(self, plan: Plan, overlap: bool) -> dict[str, Readback]:
        """The plan's readback set; with ``overlap`` two sets alternate (the second made on first use)."""
        if not overlap:
            return plan.readbacks
        if plan.spare_readbacks is None:
            plan.spare_readbacks = {n: Readback(self.device.create_buffer(r.size, "readback"), r.size)
                                    for n, r in plan.readbacks.items()}
            plan.owned += [r.buffer for r in plan.spare_readbacks.values()]
        plan.turn = not plan.turn
        return plan.spare_readbacks if plan.turn else plan.readbacks

    def output_copies(self, output_names, plan: Plan, env: dict, readbacks: dict[str, Readback]
                      ) -> tuple[list[tuple], Ticket]:
        """The copies of the asked outputs (all when None) into ``readbacks`` at these dims, and their ticket."""
        names = self.output_names(output_names)
        copies, shapes, sources = [], {}, {}
        for n in names:
            tid = self.outputs[n].tensor
            shapes[n] = [D.evaluate(d, env) for d in self.tensors[tid].shape]
            sources[n] = plan.buffer_of(tid)
            copies.append((sources[n], 0, readbacks[n].buffer, 0, max(4, self.nbytes(tid, prod(shapes[n])))))
        return copies, Ticket(names, shapes, readbacks, sources)

    def output_names(self, output_names) -> list[str]:
        """The outputs asked for (all when None), each checked to be one of the program's."""
        names = list(output_names) if output_names else list(self.outputs)
        for n in names:
            if n not in self.outputs:
                raise WebinferError(f"unknown output {n!r} (the model's outputs: {', '.join(self.outputs)})")
        return names

    async def collect(self, ticket: Ticket) -> list[HostTensor]:
        results = []
        for n in ticket.names:
            tid = self.outputs[n].tensor
            dtype, count = self.tensors[tid].dtype, prod(ticket.shapes[n])
            data = await self.device.read(ticket.readbacks[n].buffer, self.nbytes(tid, count))
            results.append(HostTensor(dtype, ticket.shapes[n], from_gpu_bytes(dtype, data, count)))
        return results
