"""webinfer as an ONNX backend (``onnx.backend.base.Backend``), so ONNX's own node tests can drive it.

``prepare`` keeps the model; the first ``run`` builds it. Inputs that nodes only use as shape arithmetic
(Reshape's shape, Slice's starts, ...; integer inputs also through integer arithmetic that ends there) and
that hold at most 64 elements are baked in as constants for that build (host shape arithmetic); every data
input stays a GPU buffer. A sequence or optional input's structure (length, presence, element shapes) is baked
the same way and its elements are fed as flat tensors; sequence outputs come back as lists, an empty optional as
None. Builds are cached per baked value and structure. The device string is accepted for the test runner's sake:
everything runs on the WebGPU adapter.
"""

from __future__ import annotations

import shutil
import tempfile

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

from .build import build
from .format.schema import to_json
from .opschema import HOST_MAX_ELEMENTS, host_inputs, integer_host_ops
from .runtime.inference import InferenceSession

# op -> input positions that carry shape arithmetic rather than data (declared in opschema.py).
HOST_INPUTS: dict[str, tuple[int, ...]] = host_inputs()
INTEGER_HOST_OPS = integer_host_ops()  # ...only for integer inputs (a float Range runs on the GPU)


# Integer ops the build evaluates on the host when their inputs are known (shape arithmetic). A small integer
# input that reaches only host positions, directly or through these, is shape arithmetic too: CenterCropPad's
# function body computes Pad's pads and Slice's starts from the target shape with Max, Sub, Div and Concat.
_SHAPE_ARITHMETIC = frozenset({"Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "Neg", "Abs", "Concat", "Gather",
                               "Slice", "Squeeze", "Unsqueeze", "Reshape", "Identity", "Cast", "Equal", "Less",
                               "Greater", "Where", "ReduceProd", "ReduceSum", "ReduceMax", "ReduceMin"})
# (Cast only to an integer type: the rest stays integer by construction.)
_INTEGER = {onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64,
            onnx.TensorProto.UINT8, onnx.TensorProto.UINT16, onnx.TensorProto.UINT32, onnx.TensorProto.UINT64}


def host_input_names(model: onnx.ModelProto) -> set[str]:
    """Graph inputs used only in host (shape) positions; integer ones also through shape arithmetic."""
    uses: dict[str, list] = {}
    for node in model.graph.node:
        for pos, name in enumerate(node.input):
            uses.setdefault(name, []).append((node, pos))
    outputs = {o.name for o in model.graph.output}
    memo: dict[tuple[str, bool], bool] = {}

    def arithmetic(node) -> bool:
        if node.domain or node.op_type not in _SHAPE_ARITHMETIC:
            return False
        return node.op_type != "Cast" or any(a.name == "to" and a.i in _INTEGER for a in node.attribute)

    def shape_only(name: str, integer: bool) -> bool:
        key = (name, integer)
        if key not in memo:
            memo[key] = False  # (a graph has no cycles; this only guards the recursion)
            memo[key] = name not in outputs and all(
                (pos in HOST_INPUTS.get(node.op_type, ()) and (integer or node.op_type not in INTEGER_HOST_OPS))
                or (integer and arithmetic(node) and all(shape_only(o, integer) for o in node.output if o))
                for node, pos in uses.get(name, ()))
        return memo[key]

    inits = {i.name for i in model.graph.initializer}
    return {i.name for i in model.graph.input if i.name not in inits
            and shape_only(i.name, i.type.tensor_type.elem_type in _INTEGER)}


class WebinferRep(BackendRep):
    def __init__(self, model: onnx.ModelProto, target: str = "portable"):
        """``target``: the kernel classes to build (options.TARGETS); tests pass one class."""
        self.model = model
        self.target = target
        inits = {i.name for i in model.graph.initializer}
        self.input_names = [i.name for i in model.graph.input if i.name not in inits]
        self.host_names = host_input_names(model)
        # sequence/optional inputs: their structure (lengths, presence) is baked into the build
        self.nested = {i.name for i in model.graph.input if i.type.WhichOneof("value") in ("sequence_type",
                                                                                          "optional_type")}
        self._sessions: dict[bytes, InferenceSession] = {}
        self.placement: list[dict] = []

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            feeds = dict(inputs)
        else:
            inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
            feeds = dict(zip(self.input_names, inputs))
        nested = {n: v for n, v in feeds.items() if n in self.nested}
        feeds = {n: v for n, v in feeds.items() if n not in self.nested}
        baked = {n: np.asarray(v) for n, v in feeds.items()
                 if n in self.host_names and np.asarray(v).size <= HOST_MAX_ELEMENTS}
        key = b"".join(n.encode() + v.dtype.str.encode() + str(v.shape).encode() + v.tobytes()
                       for n, v in sorted(baked.items())) + _structure_key(nested)
        if key not in self._sessions:
            out_dir = tempfile.mkdtemp(prefix="webinfer-backend-")
            try:
                # the caller feeds every input and reads every output: a decoder stays a plain graph
                build(self.model, out_dir, input_values=baked, target=self.target, generation=False,
                      nested_inputs=nested)
                session = InferenceSession(out_dir)
                self.placement = to_json(session.program.placement)  # (rows as the manifest's JSON has them)
                self._sessions[key] = (session, session.artifact.spec.groups)
            finally:
                shutil.rmtree(out_dir, ignore_errors=True)
        session, groups = self._sessions[key]
        rest = {n: np.asarray(v) for n, v in feeds.items() if n not in baked}
        for name, value in nested.items():  # sequences and optionals feed their elements as flat inputs
            for flat, arr in zip(_flat_names(groups["inputs"][name]), _flat_values(value)):
                rest[flat] = np.asarray(arr)
        names = [o.name for o in session.get_outputs()]
        flat = dict(zip(names, session.run(names, rest)))
        return [_regroup(groups.get("outputs", {}).get(o.name, o.name), flat) for o in self.model.graph.output]


def _flat_names(structure) -> list[str]:
    return [] if structure is None else [structure] if isinstance(structure, str) else list(structure)


def _flat_values(value) -> list:
    return [] if value is None else list(value) if isinstance(value, (list, tuple)) else [value]


def _structure_key(nested: dict) -> bytes:
    def one(v) -> str:
        if v is None:
            return "none"
        if isinstance(v, (list, tuple)):
            return "[" + ",".join(one(x) for x in v) + "]"
        v = np.asarray(v)
        return f"{v.dtype}{list(v.shape)}"

    return "".join(f"{n}={one(v)};" for n, v in sorted(nested.items())).encode()


def _regroup(structure, flat: dict):
    """A graph output from the flat outputs: an array, a list of them (a sequence) or None (empty optional)."""
    if structure is None:
        return None
    if isinstance(structure, str):
        return flat[structure]
    return [flat[n] for n in structure]


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
