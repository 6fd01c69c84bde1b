"""Browser device: ``navigator.gpu`` reached from Pyodide through its JS bridge. Standard library + Pyodide.

Mirrors ``native.py`` call for call (explicit bind group layouts, one command encoder per submit) so that the
same artifact records the same command buffer in both places. Differences forced by the browser:
- creation and reads are asynchronous (``await BrowserDevice.create()``, ``await buffer.mapAsync``);
- Dawn reports validation errors asynchronously as ``uncapturederror`` events; we collect them and raise
  them from the next ``read`` so a bad shader or binding fails the run with Dawn's message.
"""

from __future__ import annotations

from ..errors import WebinferError
from ..format.textures import texture_bytes
from .device import Device
from .select import AdapterFacts, adapter_type

# WebGPU limit names (camelCase in JS) under the hyphenated keys the session and native.py use.
_LIMITS = {
    "max-storage-buffer-binding-size": "maxStorageBufferBindingSize",
    "max-buffer-size": "maxBufferSize",
    "max-uniform-buffer-binding-size": "maxUniformBufferBindingSize",
    "max-storage-buffers-per-shader-stage": "maxStorageBuffersPerShaderStage",
    "max-compute-workgroup-storage-size": "maxComputeWorkgroupStorageSize",
    "max-compute-invocations-per-workgroup": "maxComputeInvocationsPerWorkgroup",
    "max-compute-workgroup-size-x": "maxComputeWorkgroupSizeX",
    "max-compute-workgroup-size-y": "maxComputeWorkgroupSizeY",
    "max-compute-workgroup-size-z": "maxComputeWorkgroupSizeZ",
    "max-compute-workgroups-per-dimension": "maxComputeWorkgroupsPerDimension",
    "min-storage-buffer-offset-alignment": "minStorageBufferOffsetAlignment",
    "min-uniform-buffer-offset-alignment": "minUniformBufferOffsetAlignment",
}
# Raised above WebGPU's defaults to what the adapter offers: big weights need big bindings.
_REQUEST_ADAPTER_LIMITS = ("maxStorageBufferBindingSize", "maxBufferSize")
# Requested when the adapter has them, so kernel classes that need them can be chosen (runtime/select.py).
REQUEST_FEATURES = ("shader-f16", "subgroups")
# WGSL language features kernel classes may need (navigator.gpu.wgslLanguageFeatures), counted as features by
# selection as the page's chooseProgram counts them (webinfer/site/gpu_device.mjs).
WGSL_LANGUAGE_FEATURES = ("packed_4x8_integer_dot_product",)


def _js():
    """Pyodide's bridge, imported lazily so this module imports (and is linted/tested) in CPython."""
    import js
    from pyodide.ffi import create_proxy, to_js

    return js, to_js, create_proxy


def _is_null(value) -> bool:
    if value is None:
        return True
    try:
        from pyodide.ffi import jsnull
    except ImportError:
        return False
    return value is jsnull


class BrowserDevice(Device):
    name = "browser"

    def __init__(self, adapter, device):
        """Use ``await BrowserDevice.create()``; this wraps an already requested adapter and GPUDevice."""
        js, to_js, create_proxy = _js()
        self._to_js = to_js
        self._object = js.Object
        self._usage = js.GPUBufferUsage
        self._map_read = js.GPUMapMode.READ
        self._compute = js.GPUShaderStage.COMPUTE
        self.adapter = adapter
        self.device = device
        self.limits = {key: int(getattr(device.limits, camel)) for key, camel in _LIMITS.items()}
        info = getattr(adapter, "info", None)
        self.adapter_name = (f"{getattr(info, 'vendor', '?')} {getattr(info, 'architecture', '?')}"
                             f"{' (fallback)' if getattr(adapter, 'isFallbackAdapter', False) else ''}"
                             if info is not None else "?")
        self._info = info
        self.errors: list[str] = []
        self._on_error = create_proxy(self._record_error)  # kept alive as long as the device
        device.addEventListener("uncapturederror", self._on_error)

    @classmethod
    async def create(cls, power_preference: str = "high-performance") -> "BrowserDevice":
        js, to_js, _ = _js()
        gpu = getattr(js.navigator, "gpu", None)
        if _is_null(gpu):
            raise WebinferError("this browser has no WebGPU (navigator.gpu is missing; Chromium needs a secure "
                                "context such as http://127.0.0.1, and --enable-unsafe-webgpu without a GPU)")
        adapter = await gpu.requestAdapter(to_js({"powerPreference": power_preference},
                                                 dict_converter=js.Object.fromEntries))
        if _is_null(adapter):
            raise WebinferError("navigator.gpu.requestAdapter() found no WebGPU adapter")
        limits = {name: getattr(adapter.limits, name) for name in _REQUEST_ADAPTER_LIMITS}
        features = [f for f in REQUEST_FEATURES if adapter.features.has(f)]
        device = await adapter.requestDevice(to_js({"requiredLimits": limits, "requiredFeatures": features},
                                                   dict_converter=js.Object.fromEntries))
        return cls(adapter, device)

    def facts(self) -> AdapterFacts:
        info = self._info
        text = " ".join(str(getattr(info, k, "") or "") for k in ("vendor", "architecture", "device", "description"))
        fallback = bool(getattr(info, "isFallbackAdapter", False) or getattr(self.adapter, "isFallbackAdapter", False))
        js, _, _ = _js()
        language = getattr(js.navigator.gpu, "wgslLanguageFeatures", None)
        spoken = [f for f in WGSL_LANGUAGE_FEATURES if not _is_null(language) and language.has(f)]
        features = frozenset([str(f) for f in self.device.features] + spoken)
        return AdapterFacts(adapter_type(None, fallback, text), self.adapter_name, features, self.limits)

    def _record_error(self, event) -> None:
        self.errors.append(str(getattr(event.error, "message", event.error)))

    def _obj(self, d: dict):
        return self._to_js(d, dict_converter=self._object.fromEntries)

    # -- the Device interface ----------------------------------------------------------------------
    def create_buffer(self, size: int, kind: str):
        U = self._usage
        usage = {
            "storage": U.STORAGE | U.COPY_SRC | U.COPY_DST,
            "uniform": U.UNIFORM | U.COPY_DST,
            "readback": U.MAP_READ | U.COPY_DST,
        }[kind]
        return self.device.createBuffer(self._obj({"size": max(16, (size + 15) // 16 * 16), "usage": usage}))

    def write_buffer(self, buffer, offset: int, data) -> None:
        view = memoryview(data).cast("B")
        if len(view) % 4:  # writeBuffer needs a multiple of 4 bytes
            view = memoryview(bytes(view) + b"\0" * (-len(view) % 4))
        self.device.queue.writeBuffer(buffer, offset, self._to_js(view))

    def create_texture(self, data: bytes, fmt: str):
        js, _, _ = _js()
        padded, (width, height), row = texture_bytes(data, len(data), fmt)
        usage = js.GPUTextureUsage.TEXTURE_BINDING | js.GPUTextureUsage.COPY_DST
        texture = self.device.createTexture(self._obj({"size": [width, height], "format": fmt, "usage": usage}))
        self.device.queue.writeTexture(self._obj({"texture": texture}), self._to_js(memoryview(padded)),
                                       self._obj({"bytesPerRow": row, "rowsPerImage": height}), self._to_js([width, height]))
        return texture

    def create_pipeline(self, wgsl: str, writes: list, has_uniform: bool, label: str = ""):
        entries = [{"binding": i, "visibility": self._compute,
                    **({"texture": {"sampleType": wr, "viewDimension": "2d"}} if isinstance(wr, str) else
                       {"buffer": {"type": "storage" if wr else "read-only-storage"}})} for i, wr in enumerate(writes)]
        if has_uniform:
            entries.append({"binding": len(writes), "visibility": self._compute, "buffer": {"type": "uniform"}})
        layout = self.device.createBindGroupLayout(self._obj({"entries": entries}))
        module = self.device.createShaderModule(self._obj({"code": wgsl, "label": label}))
        pipeline_layout = self.device.createPipelineLayout(self._obj({"bindGroupLayouts": [layout]}))
        pipeline = self.device.createComputePipeline(
            self._obj({"layout": pipeline_layout, "label": label, "compute": {"module": module, "entryPoint": "main"}}))
        return (pipeline, layout)

    def create_bind_group(self, pipeline, entries: list[tuple]):
        return self.device.createBindGroup(self._obj({
            "layout": pipeline[1],
            "entries": [{"binding": i, "resource": e[1].createView() if isinstance(e[0], str) else
                         {"buffer": e[0], "offset": e[1], "size": e[2]}} for i, e in enumerate(entries)],
        }))

    def submit(self, dispatches: list[tuple], copies: list[tuple], pre_copies=()) -> None:
        enc = self.device.createCommandEncoder()
        for src, so, dst, do, size in pre_copies:
            enc.copyBufferToBuffer(src, so, dst, do, (size + 3) // 4 * 4)
        if dispatches:
            cpass = enc.beginComputePass()
            for pipeline, group, (x, y, z) in dispatches:
                cpass.setPipeline(pipeline[0])
                cpass.setBindGroup(0, group)
                cpass.dispatchWorkgroups(x, y, z)
            cpass.end()
        for src, so, dst, do, size in copies:
            enc.copyBufferToBuffer(src, so, dst, do, (size + 3) // 4 * 4)
        self.device.queue.submit(self._to_js([enc.finish()]))

    async def read(self, buffer, size: int) -> bytes:
        try:
            await buffer.mapAsync(self._map_read)
        except Exception as e:  # a JsException: the buffer is invalid, the device lost, ...
            raise WebinferError(f"WebGPU readback failed: {e}{self._error_text()}") from None
        try:
            # getMappedRange's ArrayBuffer is detached by unmap(): copy it out first.
            data = buffer.getMappedRange(0, buffer.size).to_bytes()[:size]
        finally:
            buffer.unmap()
        if self.errors:
            raise WebinferError("WebGPU validation failed:" + self._error_text())
        return data

    def _error_text(self) -> str:
        errors, self.errors = self.errors, []
        return "".join(f"\n  {e}" for e in errors[:8]) + (f"\n  ... {len(errors) - 8} more" if len(errors) > 8 else "")

    def destroy_buffer(self, buffer) -> None:
        buffer.destroy()


async def fetch_bytes(url: str) -> bytes:
    """GET ``url`` with the browser's fetch; raise a clear error on an HTTP failure."""
    import js

    response = await js.fetch(url)
    if not response.ok:
        raise WebinferError(f"GET {url}: HTTP {response.status}")
    return (await response.arrayBuffer()).to_bytes()


async def fetch_artifact(base_url: str, dest: str) -> str:
    """Copy an artifact served at ``base_url`` (a directory URL) into Pyodide's file system at ``dest``.

    Only the files its manifest names are fetched (their sha256 is checked when the session loads them).
    """
    import os

    from ..artifact import MANIFEST_SHA, parse_manifest_bytes

    base = base_url if base_url.endswith("/") else base_url + "/"
    raw, sha = await fetch_bytes(base + "manifest.json"), await fetch_bytes(base + MANIFEST_SHA)
    _, spec = parse_manifest_bytes(raw, sha, base + "manifest.json")
    files = [e.file for e in spec.shaders + spec.shards] + list(spec.assets)
    os.makedirs(dest, exist_ok=True)
    for rel, data in (("manifest.json", raw), (MANIFEST_SHA, sha)):
        with open(os.path.join(dest, rel), "wb") as f:
            f.write(data)
    for rel in files:
        path = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(await fetch_bytes(base + rel))
    return dest
