"""Where a step's tensor lives in GPU memory: its base buffer, the byte offset of a view (a band of an input
larger than one binding starts part-way into the input's buffer) and the bytes bound. Standard library only.

A buffer may be larger than a binding (WebGPU: maxBufferSize vs maxStorageBufferBindingSize), so the binding
limit is checked on what the steps bind, not on the buffers."""

from __future__ import annotations

from .. import dims as D
from ..dtypes import gpu_nbytes
from ..errors import WebinferError
from ..format.schema import Tensor


def view_offset(tensor: Tensor, env: dict) -> int:
    """The view's first element in its base buffer at these dims (0 for everything but a band)."""
    return 0 if tensor.offset is None else D.evaluate(tensor.offset, env)


def binding(tensors: list[Tensor], buffers: dict, base: list[int], numel: list[int], tid: int, env: dict) -> tuple:
    """(buffer, byte offset, bytes) that a step binds for tensor ``tid``; ``env``: the dims the plan is sized for."""
    t = tensors[tid]
    start = gpu_nbytes(t.dtype, view_offset(t, env))
    return buffers[base[tid]], start, max(4, gpu_nbytes(t.dtype, numel[tid]))


def check_bindings(tensors: list[Tensor], steps: list, numel: list[int], limit: int, skip=frozenset(),
                   textures=frozenset()) -> None:
    """Each storage binding within the device's ``max-storage-buffer-binding-size``."""
    for i, step in enumerate(steps):
        if i in skip:
            continue
        for tid in step.reads + step.writes:
            nbytes = gpu_nbytes(tensors[tid].dtype, numel[tid])
            if tid not in textures and nbytes > limit:
                raise WebinferError(f"a tensor of {nbytes} bytes exceeds this device's binding limit ({limit})")


def check_view(tensors: list[Tensor], tid: int, base: int, numel: list[int], env: dict) -> None:
    """A view (with its offset) inside its base tensor."""
    end = view_offset(tensors[tid], env) + numel[tid]
    if end > numel[base]:
        raise WebinferError(f"tensor {tid} is a view of {numel[base]} elements of tensor {base} "
                            f"but reaches element {end} at these dims")
