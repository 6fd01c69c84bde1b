"""Native device: wgpu-py (wgpu-native over Vulkan, Metal or D3D12; lavapipe on this machine)."""

from __future__ import annotations

import os
import tempfile
import threading

from ..errors import WebinferError
from ..format.textures import texture_bytes
from . import cffi_types
from .device import Device
from .device_lost import guard
from .select import AdapterFacts, adapter_type

_DEVICE = None
_PIPELINES: dict[tuple, tuple] = {}  # (wgsl, writes, uniform) -> (pipeline, bind group layout), oldest first
_MAX_PIPELINES = 512


BIG_LIMITS = ("max-storage-buffer-binding-size", "max-buffer-size")


_LOCK = threading.Lock()  # (start_device's thread and the first request_device)


def start_device() -> None:
    """Begin creating the process's device in a thread, ahead of its first use: the driver's start (lavapipe
    ~0.7 s wall, half of it waiting) overlaps what the caller does meanwhile (InferenceSession: reading and
    checking the artifact). A failure is left for request_device to raise, in the caller's thread."""
    if _DEVICE is None and not _LOCK.locked():
        threading.Thread(target=_request_quietly, name="webinfer-device", daemon=True).start()


def _request_quietly() -> None:
    try:
        request_device()
    except Exception:  # (request_device raises it again where it is used)
        pass


def request_device():
    """One wgpu device per process (creating one costs ~0.4 s); WebGPU's default limits but the adapter's
    binding and buffer sizes."""
    with _LOCK:
        return _request_device()


def _request_device():
    global _DEVICE
    if _DEVICE is None:
        os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="webinfer-xdg-"))
        import wgpu
        from wgpu.backends.wgpu_native import ffi

        cffi_types.install(ffi)  # 0.6 s less at start-up (cffi_types.py)

        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        if adapter is None:
            raise WebinferError("no WebGPU adapter found (install a Vulkan driver, e.g. mesa-vulkan-drivers)")
        # timestamps inside a compute pass let `webinfer profile` time every kernel (native only); f16 and
        # subgroups let the kernel classes that need them run (wgpu-native names the latter "subgroup").
        wanted = [f for f in ("timestamp-query", "timestamp-query-inside-passes", "shader-f16", "subgroup")
                  if f in adapter.features]
        # the adapter's own binding and buffer sizes, not WebGPU's defaults (as the page's openGPU asks): a
        # program needing more than the adapter has is refused in one line by runtime/select.py
        limits = {k: adapter.limits[k] for k in BIG_LIMITS if k in adapter.limits}
        _DEVICE = adapter.request_device_sync(required_features=wanted, required_limits=limits)
    return _DEVICE


def forget_device(device) -> None:
    """A lost device is no longer the process's: the next ``request_device`` creates a new one (device_lost.py)."""
    global _DEVICE
    if _DEVICE is device:
        _DEVICE = None
        _PIPELINES.clear()


NAGA_DROPS = ("enable subgroups;\n", "diagnostic(off, subgroup_uniformity);\n")


def naga_wgsl(wgsl: str) -> str:
    """WGSL as wgpu-native's compiler (naga) takes it: naga has the subgroup built-ins without the
    ``enable subgroups;`` directive that the WGSL spec (and Chromium's Tint) require, and rejects it; it has no
    subgroup uniformity rule either (nor checks it) and logs an error for ``diagnostic(off,
    subgroup_uniformity)``, which Tint needs for a broadcast under a branch. Both go, from the module's head."""
    for directive in NAGA_DROPS:
        head, sep, rest = wgsl.partition(directive)
        if sep and "fn " not in head:
            wgsl = head + rest
    return wgsl


NAGA_LANGUAGE_FEATURES = ("packed_4x8_integer_dot_product",)


class NativeDevice(Device):
    name = "native"
    lost: str | None = None  # what said the device was lost (device_lost.guard: every call then raises)

    def __init__(self):
        import wgpu

        self._wgpu = wgpu
        self.device = request_device()
        self.limits = dict(self.device.limits)
        info = self.device.adapter.info
        self.adapter_name = f"{info.get('device', '?')} ({info.get('backend_type', '?')})"

    def forget(self) -> None:
        forget_device(self.device)

    def facts(self) -> AdapterFacts:
        info = self.device.adapter.info
        text = " ".join(str(info.get(k, "")) for k in ("vendor", "architecture", "device", "description"))
        # wgpu-native names WebGPU's "subgroups" feature "subgroup"; naga compiles the WGSL language features
        # kernel classes may need, which wgpu-native does not report (wgsl_language_features is empty).
        features = frozenset(["subgroups" if f == "subgroup" else f for f in self.device.features]
                             + list(NAGA_LANGUAGE_FEATURES))
        return AdapterFacts(adapter_type(info.get("adapter_type"), False, text), self.adapter_name, features,
                            self.limits)

    @guard
    def create_buffer(self, size: int, kind: str):
        U = self._wgpu.BufferUsage
        usage = {
            "storage": U.STORAGE | U.COPY_SRC | U.COPY_DST,
            "uniform": U.UNIFORM | U.COPY_DST,
            "readback": U.MAP_READ | U.COPY_DST,
        }[kind]
        return self.device.create_buffer(size=max(16, (size + 15) // 16 * 16), usage=usage)

    @guard
    def write_buffer(self, buffer, offset: int, data) -> None:
        self.device.queue.write_buffer(buffer, offset, data)

    @guard
    def create_texture(self, data: bytes, fmt: str):
        padded, (width, height), row = texture_bytes(data, len(data), fmt)
        U = self._wgpu.TextureUsage
        texture = self.device.create_texture(size=(width, height, 1), format=fmt, usage=U.TEXTURE_BINDING | U.COPY_DST)
        self.device.queue.write_texture({"texture": texture}, padded, {"bytes_per_row": row, "rows_per_image": height},
                                        (width, height, 1))
        return texture

    @guard
    def create_pipeline(self, wgsl: str, writes: list, has_uniform: bool, label: str = ""):
        """A compute pipeline, shared by every session of the process (the device is one per process; lavapipe
        compiles at creation, ~35 ms per kernel, so a second session of an artifact starts at once)."""
        key = (wgsl, tuple(writes), has_uniform)
        if key not in _PIPELINES:
            if len(_PIPELINES) >= _MAX_PIPELINES:
                del _PIPELINES[next(iter(_PIPELINES))]
            _PIPELINES[key] = self._create_pipeline(wgsl, writes, has_uniform, label)
        return _PIPELINES[key]

    def _create_pipeline(self, wgsl: str, writes: list, has_uniform: bool, label: str):
        w = self._wgpu
        entries = [
            {"binding": i, "visibility": w.ShaderStage.COMPUTE,
             **({"texture": {"sample_type": wr, "view_dimension": "2d"}} if isinstance(wr, str) else
                {"buffer": {"type": w.BufferBindingType.storage if wr else w.BufferBindingType.read_only_storage}})}
            for i, wr in enumerate(writes)
        ]
        if has_uniform:
            entries.append({"binding": len(writes), "visibility": w.ShaderStage.COMPUTE,
                            "buffer": {"type": w.BufferBindingType.uniform}})
        layout = self.device.create_bind_group_layout(entries=entries)
        module = self.device.create_shader_module(label=label, code=naga_wgsl(wgsl))
        pipeline = self.device.create_compute_pipeline(
            layout=self.device.create_pipeline_layout(bind_group_layouts=[layout]),
            compute={"module": module, "entry_point": "main"},
        )
        return (pipeline, layout)

    @guard
    def create_bind_group(self, pipeline, entries: list[tuple]):
        return self.device.create_bind_group(
            layout=pipeline[1],
            entries=[{"binding": i, "resource": e[1].create_view() if isinstance(e[0], str) else
                      {"buffer": e[0], "offset": e[1], "size": e[2]}} for i, e in enumerate(entries)],
        )

    @guard
    def submit(self, dispatches: list[tuple], copies: list[tuple], pre_copies=()) -> None:
        enc = self.device.create_command_encoder()
        for src, so, dst, do, size in pre_copies:
            enc.copy_buffer_to_buffer(src, so, dst, do, (size + 3) // 4 * 4)
        if dispatches:
            cpass = enc.begin_compute_pass()
            for pipeline, group, (x, y, z) in dispatches:
                cpass.set_pipeline(pipeline[0])
                cpass.set_bind_group(0, group)
                cpass.dispatch_workgroups(x, y, z)
            cpass.end()
        for src, so, dst, do, size in copies:
            enc.copy_buffer_to_buffer(src, so, dst, do, (size + 3) // 4 * 4)
        self.device.queue.submit([enc.finish()])

    @guard
    def profile(self, dispatches: list[tuple]) -> list[int]:
        """Run the dispatches once with a timestamp around each; returns nanoseconds per dispatch."""
        if "timestamp-query-inside-passes" not in self.device.features:
            raise RuntimeError("this adapter cannot write timestamps inside compute passes")
        w = self._wgpu
        n = len(dispatches)
        qs = self.device.create_query_set(type=w.QueryType.timestamp, count=n + 1)
        size = (n + 1) * 8
        resolved = self.device.create_buffer(size=size, usage=w.BufferUsage.QUERY_RESOLVE | w.BufferUsage.COPY_SRC)
        out = self.device.create_buffer(size=size, usage=w.BufferUsage.MAP_READ | w.BufferUsage.COPY_DST)
        enc = self.device.create_command_encoder()
        cpass = enc.begin_compute_pass()
        cpass._write_timestamp(qs, 0)
        for i, (pipeline, group, (x, y, z)) in enumerate(dispatches):
            cpass.set_pipeline(pipeline[0])
            cpass.set_bind_group(0, group)
            cpass.dispatch_workgroups(x, y, z)
            cpass._write_timestamp(qs, i + 1)
        cpass.end()
        enc.resolve_query_set(qs, 0, n + 1, resolved, 0)
        enc.copy_buffer_to_buffer(resolved, 0, out, 0, size)
        self.device.queue.submit([enc.finish()])
        out.map_sync(w.MapMode.READ)
        import struct

        stamps = struct.unpack(f"<{n + 1}Q", bytes(out.read_mapped(0, size)))
        out.unmap()
        period = getattr(self.device.queue, "get_timestamp_period", lambda: 1.0)()
        return [int((stamps[i + 1] - stamps[i]) * period) for i in range(n)]

    @guard
    async def read(self, buffer, size: int) -> bytes:
        buffer.map_sync(self._wgpu.MapMode.READ)
        try:
            return bytes(buffer.read_mapped(0, buffer.size))[:size]
        finally:
            buffer.unmap()

    def destroy_buffer(self, buffer) -> None:
        buffer.destroy()
