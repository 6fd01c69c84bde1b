"""webinfer as an ONNX backend (``onnx.backend.base.Backend``), so ONNX's own node tests can drive it.

``prepare`` keeps the model; the first ``run`` builds it. Integer inputs that a node only uses as shape
arithmetic (Reshape's shape, Slice's starts, ...) and that hold at most 64 elements are baked in as
constants for that build (host shape arithmetic); every data input stays a GPU buffer. Builds are cached
per baked value. The device string is accepted for the test runner's sake: everything runs on the WebGPU
adapter.
"""

from __future__ import annotations

import shutil
import tempfile

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

from .build import build
from .opschema import host_inputs
from .runtime.inference import InferenceSession

HOST_MAX_ELEMENTS = 64
# op -> input positions that carry shape arithmetic rather than data (declared in opschema.py).
HOST_INPUTS: dict[str, tuple[int, ...]] = host_inputs()


def host_input_names(model: onnx.ModelProto) -> set[str]:
    """Graph inputs used only in host (shape) positions."""
    host, data = set(), set()
    for node in model.graph.node:
        for pos, name in enumerate(node.input):
            (host if pos in HOST_INPUTS.get(node.op_type, ()) else data).add(name)
    return host - data


class WebinferRep(BackendRep):
    def __init__(self, model: onnx.ModelProto, target: str = "portable"):
        """``target``: the kernel classes to build (options.TARGETS); tests pass one class."""
        self.model = model
        self.target = target
        inits = {i.name for i in model.graph.initializer}
        self.input_names = [i.name for i in model.graph.input if i.name not in inits]
        self.host_names = host_input_names(model)
        self._sessions: dict[bytes, InferenceSession] = {}
        self.placement: list[dict] = []

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            feeds = dict(inputs)
        else:
            inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
            feeds = dict(zip(self.input_names, inputs))
        baked = {n: np.asarray(v) for n, v in feeds.items()
                 if n in self.host_names and np.asarray(v).size <= HOST_MAX_ELEMENTS}
        key = b"".join(n.encode() + v.dtype.str.encode() + str(v.shape).encode() + v.tobytes()
                       for n, v in sorted(baked.items()))
        if key not in self._sessions:
            out_dir = tempfile.mkdtemp(prefix="webinfer-backend-")
            try:
                # the caller feeds every input and reads every output: a decoder stays a plain graph
                manifest = build(self.model, out_dir, input_values=baked, target=self.target, generation=False)
                self.placement = manifest["placement"]
                self._sessions[key] = InferenceSession(out_dir)
            finally:
                shutil.rmtree(out_dir, ignore_errors=True)
        session = self._sessions[key]
        rest = {n: np.asarray(v) for n, v in feeds.items() if n not in baked}
        names = [o.name for o in session.get_outputs()]
        return session.run(names, rest)


class WebinferBackend(Backend):
    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", target: str = "portable", **kwargs) -> WebinferRep:
        super().prepare(model, device, **kwargs)
        return WebinferRep(model, target=target)

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs, device: str = "CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device: str = "CPU", outputs_info=None, **kwargs):
        raise NotImplementedError("webinfer runs whole models; use run_model")

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper() in ("CPU", "GPU", "WEBGPU")


prepare = WebinferBackend.prepare
run_model = WebinferBackend.run_model
supports_device = WebinferBackend.supports_device
