"""The GPU as the session sees it. Two implementations: native (wgpu-py) and browser (navigator.gpu).

Reading back is asynchronous at the core, because a browser can only ``mapAsync``.
"""

from __future__ import annotations


class Device:
    """Minimal WebGPU surface the session needs; buffers and pipelines are opaque handles."""

    name = "device"
    limits: dict

    def facts(self):
        """The adapter's type, the device's features and limits (runtime/select.py chooses a program by them)."""
        raise NotImplementedError

    def create_buffer(self, size: int, kind: str):
        """kind: 'storage' (read/write, copy src/dst), 'uniform', or 'readback' (map-read)."""
        raise NotImplementedError

    def write_buffer(self, buffer, offset: int, data) -> None:
        raise NotImplementedError

    def create_texture(self, data: bytes, fmt: str):
        """A weight as a 2-D texture of ``fmt`` (format/textures.py has the layout), written with ``data``."""
        raise NotImplementedError

    def create_pipeline(self, wgsl: str, writes: list, has_uniform: bool, label: str = ""):
        """A compute pipeline with an explicit layout: storage bindings (read-only unless written; a sampleType
        string, "uint" or "unfilterable-float", marks a texture), then one uniform binding when the kernel has
        symbolic params. ``label`` names the shader in the device's own error messages (its file and kernel)."""
        raise NotImplementedError

    def create_bind_group(self, pipeline, entries: list[tuple]):
        """entries: (buffer, offset, size), or ("texture", texture), in binding order."""
        raise NotImplementedError

    def submit(self, dispatches: list[tuple], copies: list[tuple], pre_copies=()) -> None:
        """One command buffer: ``pre_copies``, a compute pass of (pipeline, bind_group, (x, y, z)), then buffer
        copies; a copy is (src, src_offset, dst, dst_offset, size)."""
        raise NotImplementedError

    async def read(self, buffer, size: int) -> bytes:
        """Map a readback buffer and copy its first ``size`` bytes out."""
        raise NotImplementedError

    def destroy_buffer(self, buffer) -> None:
        """Free a buffer or a texture now."""
