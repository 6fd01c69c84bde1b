"""The public session, modelled on onnxruntime: ``InferenceSession(path).run(output_names, feeds)``."""

from __future__ import annotations

from ..artifact import Artifact
from ..errors import WebinferError
from . import audio, ml_outputs, vision
from .session import SessionCore, run_sync
from .tensor import HostTensor


class InferenceSession:
    """Load an artifact directory and run it. Natively the device is wgpu-py; in Pyodide pass a
    ``BrowserDevice`` and use ``await run_async(...)``; ``device="cpu"`` runs the artifact's CPU model
    (``build --cpu``) with onnxruntime instead, where there is no GPU adapter (runtime/cpu.py)."""

    def __init__(self, path: str, device=None, kernel_class: str | None = None):
        """``kernel_class`` forces one of the artifact's programs; by default the device's adapter decides
        (``self.choice``: which class and why, runtime/select.py). ``device``: None or "gpu" (the native
        WebGPU device), "cpu" (the artifact's CPU model on onnxruntime), or a device object (BrowserDevice)."""
        if isinstance(device, str) and device != "cpu":
            if device != "gpu":
                raise WebinferError(f'device must be "gpu" (the default), "cpu" or a device object, got {device!r}')
            device = None
        if device is None:
            from .native import start_device

            start_device()  # (the device starts while the artifact is read and checked)
        self.artifact = Artifact.load(path)
        self._cpu = None
        if device == "cpu":
            if kernel_class is not None:
                raise WebinferError('kernel_class chooses a GPU program; device="cpu" runs none')
            from .cpu import CpuSession

            self._cpu = CpuSession(self.artifact)
            self.device, self.choice, self.program, self.cpu_why = "cpu", None, None, self._cpu.why
            return
        if device is None:
            from .native import NativeDevice

            device = NativeDevice()
        self.device = device
        self._core = SessionCore(self.artifact.manifest, self.artifact.shader, self.artifact.read_shard, device,
                                 kernel_class=kernel_class, spec=self.artifact.spec)
        self.choice = self._core.choice
        self.program = self._core.program  # the chosen program, typed (steps, outputs, weights, ...)

    @property
    def core(self):
        """The SessionCore running the artifact on a GPU device (None on ``device="cpu"``)."""
        return getattr(self, "_core", None)

    def get_inputs(self):
        return (self._cpu or self._core).get_inputs()

    def get_outputs(self):
        return (self._cpu or self._core).get_outputs()

    async def run_async(self, output_names, feeds: dict, dims: dict | None = None) -> list:
        """``dims``: values of dims no input carries (a KV-cache artifact's past length)."""
        if not isinstance(feeds, dict):
            raise WebinferError(f"feeds must be a dict {{input name: array}}, got {type(feeds).__name__}")
        if self._cpu is not None:
            return self._cpu.run(output_names, feeds)
        feeds = vision.pack_image(self.artifact.spec, feeds)
        feeds, dims = audio.pack_audio(self.artifact.spec, feeds, dims)  # (PCM and its rate: runtime/audio.py)
        outputs = [_to_array(t) for t in await self._core.run_async(output_names, feeds, dims)]
        return ml_outputs.present(self.artifact.spec, self._core.runner.output_names(output_names), outputs)

    def run(self, output_names, feeds: dict, dims: dict | None = None) -> list:
        """Synchronous run (native devices only): returns numpy arrays when numpy is importable."""
        return run_sync(self.run_async(output_names, feeds, dims))

    async def classify_async(self, image, width: int | None = None, height: int | None = None) -> list:
        """An artifact built with --preprocess and --postprocess: RGBA8 pixels of any size (see
        ``vision.image_feed``) -> [(label, score)], best first."""
        return await vision.classify(self._cpu or self._core, image, width, height, self.artifact.read_asset)

    def classify(self, image, width: int | None = None, height: int | None = None) -> list:
        return run_sync(self.classify_async(image, width, height))


def _to_array(t: HostTensor):
    try:
        import numpy as np
    except ImportError:
        return t
    try:
        dtype = np.dtype(t.dtype)
    except TypeError:  # bfloat16, float8, int4...: numpy knows them once ml_dtypes is imported
        import ml_dtypes  # noqa: F401

        dtype = np.dtype(t.dtype)
    return np.frombuffer(t.data, dtype=dtype).reshape(t.shape).copy()
