"""What ``webinfer inspect`` says a session allocates (weights, states, planned activations) against what the
session really asks the device for, and the binding size a program records as a requirement (refused in one
line by program choice on a device that grants less)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tests import tiny_llama
from tests.graph.test_prepost import classifier_model
from webinfer.artifact import Artifact, program_view
from webinfer.build import build
from webinfer.errors import WebinferError
from webinfer.llm.generate import Generator
from webinfer.report import build_report, gpu_memory
from webinfer.runtime.inference import InferenceSession
from webinfer.runtime.native import NativeDevice
from webinfer.runtime.select import AdapterFacts, choose_program


class CountingDevice(NativeDevice):
    """The native device, counting the storage bytes and textures sessions create on it."""

    def __init__(self):
        super().__init__()
        self.storage_bytes = 0

    def create_buffer(self, size: int, kind: str):
        if kind == "storage":
            self.storage_bytes += size
        return super().create_buffer(size, kind)

    def create_texture(self, data: bytes, fmt: str):
        self.storage_bytes += len(data)
        return super().create_texture(data, fmt)


def mlp_model() -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    w1, w2 = rng.standard_normal((256, 1024)).astype(np.float32), rng.standard_normal((1024, 64)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["y"])]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 256])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 64])],
                          [onnx.numpy_helper.from_array(w1, "w1"), onnx.numpy_helper.from_array(w2, "w2")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _reported(art: str, session_choice: int, dims: dict) -> int:
    m = Artifact.load(art).manifest
    return gpu_memory(build_report(program_view(m, session_choice), dims))


@pytest.mark.parametrize("rows", [1, 300])
def test_inspect_memory_matches_what_a_session_allocates(tmp_path, rows):
    art = str(tmp_path / "mlp.wi")
    build(mlp_model(), art)
    device = CountingDevice()
    session = InferenceSession(art, device=device)
    session.run(None, {"x": np.ones((rows, 256), np.float32)})
    want = _reported(art, session.choice.index, {"n": rows})
    print(f"mlp n={rows}: inspect says {want:,} bytes, the session allocated {device.storage_bytes:,}")
    assert abs(device.storage_bytes - want) <= 0.05 * want


def test_inspect_memory_of_a_conv_net(tmp_path):
    art = str(tmp_path / "cls.wi")
    build(classifier_model(), art)
    device = CountingDevice()
    session = InferenceSession(art, device=device)
    session.run(None, {"x": np.ones((1, 3, 16, 16), np.float32)})
    want = _reported(art, session.choice.index, {})
    assert abs(device.storage_bytes - want) <= 0.05 * want, (device.storage_bytes, want)


def test_inspect_memory_of_a_decoder_with_its_kv_cache(tmp_path):
    art = str(tmp_path / "llama.wi")
    build(str(tiny_llama.tiny_llama(tiny_llama.TINY) / "model.onnx"), art, max_seq=256)
    device = CountingDevice()
    gen = Generator.load(art, device=device)
    list(gen.generate([5], max_new_tokens=1, stop_at_eos=False))  # one row: prefill and decode share a plan
    m = Artifact.load(art).manifest
    report = build_report(program_view(m, gen.core.choice.index), {"sequence": 1})
    assert report["state_bytes"] > report["peak_bytes"]  # the cache at its capacity dominates the activations
    want = gpu_memory(report)
    print(f"tiny llama: inspect says {want:,} bytes ({report['state_bytes']:,} of KV cache), "
          f"the session allocated {device.storage_bytes:,}")
    assert abs(device.storage_bytes - want) <= 0.05 * want


def test_a_device_with_a_smaller_binding_is_refused_in_one_line(tmp_path):
    art = str(tmp_path / "mlp.wi")
    build(mlp_model(), art)
    m = Artifact.load(art).spec
    need = 256 * 1024 * 4  # w1, the largest buffer a step binds
    for p in m.programs:
        assert p.requires.limits["max-storage-buffer-binding-size"] == need
    small = AdapterFacts("discrete", "small-gpu", frozenset(), {"max-storage-buffer-binding-size": need - 4})
    with pytest.raises(WebinferError) as e:
        choose_program(m, small)
    assert "\n" not in str(e.value)
    assert f"max-storage-buffer-binding-size {need} (device: {need - 4})" in str(e.value)
    assert choose_program(m, AdapterFacts("discrete", "big-gpu", frozenset(),
                                          {"max-storage-buffer-binding-size": need})).kernel_class == "gpu"
