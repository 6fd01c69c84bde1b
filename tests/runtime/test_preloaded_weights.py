"""SessionCore's pre-uploaded weights hook (the browser's JS loader writes shards straight into GPU
buffers): a session given those buffers must run like one that uploads its own, and a missing one is an
error that says so."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from webinfer.artifact import Artifact
from webinfer.build import build
from webinfer.errors import WebinferError
from webinfer.runtime.inference import InferenceSession
from webinfer.runtime.native import NativeDevice
from webinfer.runtime.session import SessionCore, run_sync
from webinfer.runtime.tensor import HostTensor


def _model():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 5)).astype(np.float32)
    b = rng.standard_normal((5,)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _upload_like_the_browser(device, art: Artifact) -> dict:
    """What webinfer/site/weights.mjs does: one buffer per weight tensor, each chunk written from its shard."""
    buffers = {}
    for tid, t in enumerate(art.manifest["tensors"]):
        if t["kind"] != "weight":
            continue
        buf = device.create_buffer(int(np.prod(t["shape"], dtype=np.int64)) * 4, "storage")
        for shard, offset, n, dst in t["chunks"]:
            if n:
                device.write_buffer(buf, dst, art.read_shard(shard)[offset:offset + n])
        buffers[tid] = buf
    return buffers


def test_preloaded_weights_run_like_uploaded_ones(tmp_path):
    path = str(tmp_path / "a.wi")
    build(_model(), path)
    x = np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32)
    want = InferenceSession(path).run(None, {"x": x})[0]
    art, device = Artifact.load(path), NativeDevice()

    def no_shards(i):
        raise AssertionError("read_shard must not be called when weights are given")

    core = SessionCore(art.manifest, art.shader_sources(), no_shards, device,
                       weights=_upload_like_the_browser(device, art))
    (got,) = run_sync(core.run_async(None, {"x": HostTensor("float32", [2, 8], x.tobytes())}))
    np.testing.assert_array_equal(np.frombuffer(got.data, np.float32).reshape(2, 5), want)

    partial = dict(list(_upload_like_the_browser(device, art).items())[:1])
    with pytest.raises(WebinferError, match="pre-uploaded weights lack 1 weight tensor"):
        SessionCore(art.manifest, art.shader_sources(), no_shards, device, weights=partial)


def test_release_destroys_every_buffer_the_session_holds(tmp_path):
    """What a page's session.close() does in the worker: weights, plans and readbacks are destroyed at once."""
    path = str(tmp_path / "a.wi")
    build(_model(), path)
    art, device = Artifact.load(path), NativeDevice()
    made, destroyed = [], []
    create, destroy = device.create_buffer, device.destroy_buffer
    device.create_buffer = lambda size, kind: made.append(create(size, kind)) or made[-1]
    device.destroy_buffer = lambda buf: destroyed.append(buf) or destroy(buf)
    core = SessionCore(art.manifest, art.shader_sources(), art.read_shard, device)
    x = np.ones((2, 8), np.float32)
    run_sync(core.run_async(None, {"x": HostTensor("float32", [2, 8], x.tobytes())}))
    assert made and not destroyed
    core.release()
    assert sorted(map(id, destroyed)) == sorted(map(id, made))
    assert core.gpu_bytes()["plans"] == 0
