"""The CPU path natively: the artifact's CPU model (``build --cpu``, artifact.CPU_MODEL: the source model as
standard ONNX) run by onnxruntime, so a machine without a GPU adapter still gets an answer from the same
artifact. Pages do the same with onnxruntime-web's wasm backend (site/cpu.mjs).

onnxruntime and numpy are imported only here, when ``device="cpu"`` is asked for: the runtime itself stays
standard-library Python (Pyodide never imports this module's engine).
"""

from __future__ import annotations

from .. import dims as D
from ..artifact import CPU_MODEL, Artifact
from ..errors import WebinferError
from ..format.schema import Named
from . import ml_outputs, vision

# onnxruntime folds the CPU model's int4 weights (DequantizeLinear of constants, graph/cpu_weights.py) into
# float32 only with its QDQ fusions off; (the build side's constant, restated: runtime never imports graph/)
SESSION_CONFIG = {"session.disable_quant_qdq": "1"}


class CpuSession:
    """onnxruntime over the artifact's CPU model; inputs and outputs are described from the manifest, as the
    GPU path describes them."""

    def __init__(self, artifact: Artifact):
        entry = artifact.spec.assets.get(CPU_MODEL)
        if entry is None:
            raise WebinferError(f"{artifact.path}: this artifact carries no CPU model (build it with --cpu)")
        try:
            import onnxruntime
        except ImportError:
            raise WebinferError('device="cpu" needs onnxruntime (pip install onnxruntime)') from None
        self.spec = artifact.spec  # the typed manifest (format/schema.py), as SessionCore's
        options = onnxruntime.SessionOptions()
        for key, value in SESSION_CONFIG.items():  # (as the page's sessions: site/cpu.mjs)
            options.add_session_config_entry(key, value)
        self.session = onnxruntime.InferenceSession(artifact.read(entry), options,
                                                    providers=["CPUExecutionProvider"])
        self._types = {i.name: i.type for i in self.session.get_inputs()}
        self.why = f"device='cpu': onnxruntime {onnxruntime.__version__} CPUExecutionProvider"

    def get_inputs(self) -> list:
        return [self._io(io) for io in self.spec.inputs]

    def get_outputs(self) -> list:
        return [self._io(io) for io in self.spec.programs[0].outputs]

    def _io(self, io: Named):
        from .tensor import IOInfo

        t = self.spec.tensors[io.tensor]
        return IOInfo(io.name, t.dtype, [d if isinstance(d, int) else D.json_text(d) for d in t.shape])

    def run(self, output_names, feeds: dict) -> list:
        """onnxruntime's outputs, classic-ML ones formatted as the GPU path formats them (ZipMap dicts, string
        labels: the CPU model computes indices and probabilities, as the GPU program does)."""
        names = list(output_names) if output_names else [o.name for o in self.get_outputs()]
        return ml_outputs.present(self.spec, names, self._run(names, feeds))

    def _run(self, names: list, feeds: dict) -> list:
        import numpy as np

        known = {io.name for io in self.spec.inputs}
        unknown = sorted(set(feeds) - known)
        if unknown:
            raise WebinferError(f"unknown input {unknown[0]!r} (inputs: {', '.join(sorted(known))})")
        missing = sorted(known - set(feeds))
        if missing:
            raise WebinferError(f"missing feed for input {missing[0]!r}")
        from .tensor import HostTensor

        arrays = {}
        for name, value in vision.pack_image(self.spec, feeds).items():  # (image pixels, as the GPU path takes)
            if isinstance(value, HostTensor):
                value = np.frombuffer(bytes(value.data), value.dtype).reshape(value.shape)
            dtype = _NUMPY.get(self._types.get(name, ""))
            arrays[name] = np.asarray(value, dtype=dtype)
        try:
            return self.session.run(names, arrays)
        except Exception as e:  # onnxruntime's InvalidArgument (a feed's rank or shape): the user's to fix
            if type(e).__name__ != "InvalidArgument":
                raise
            text = str(e).split(" : ", 3)[-1].split(" Please fix", 1)[0].strip()
            raise WebinferError(f"device='cpu': onnxruntime refused the feeds: {text[:300]}") from None


    async def run_async(self, output_names, feeds: dict) -> list:
        """As SessionCore.run_async for runtime/vision.py's classify: HostTensor feeds, flat outputs."""
        import numpy as np

        names = list(output_names) if output_names else [o.name for o in self.get_outputs()]
        return [np.asarray(a).ravel() for a in self._run(names, feeds)]


# onnxruntime's input types -> numpy dtypes (feeds are converted to the model's type, as the GPU path does).
_NUMPY = {"tensor(float)": "float32", "tensor(double)": "float64", "tensor(float16)": "float16",
          "tensor(int8)": "int8", "tensor(int16)": "int16", "tensor(int32)": "int32", "tensor(int64)": "int64",
          "tensor(uint8)": "uint8", "tensor(uint16)": "uint16", "tensor(uint32)": "uint32",
          "tensor(uint64)": "uint64", "tensor(bool)": "bool"}
