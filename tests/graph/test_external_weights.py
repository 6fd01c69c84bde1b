"""A build's memory (issue 37: multi-GB decoders): external tensors are read straight into arrays the graph owns
(graph/importer.py), a packed weight's source is freed as soon as it is packed (graph/quantize.py), and weight
shards past the first spill to disk while the artifact is written (artifact.py). Checked against onnxruntime
on the same model, and that a damaged external file is one clear line."""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from webinfer import InferenceSession
from webinfer.build import build
from webinfer.errors import WebinferError


def external_model(folder, k: int = 1024, n: int = 10_240) -> str:
    """x @ w1 (40 MB: three 16 MiB shards) then relu then @ w2, saved with its weights in model.onnx.data."""
    rng = np.random.default_rng(5)
    w1 = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    w2 = (rng.standard_normal((n, 8)) / np.sqrt(n)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["y"])]
    g = helper.make_graph(nodes, "ext", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["s", k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["s", 8])],
                          [onnx.numpy_helper.from_array(w1, "w1"), onnx.numpy_helper.from_array(w2, "w2")])
    path = os.path.join(folder, "model.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path, save_as_external_data=True,
              location="model.onnx.data")
    return path


@pytest.mark.parametrize("quantize", [None, "f16"])
def test_external_weights_build_and_match_onnxruntime(tmp_path, quantize):
    src = tmp_path / "src"
    src.mkdir()
    path = external_model(str(src))
    out = tmp_path / "out" / "ext.wi"  # (a parent that does not exist yet: the spill folder goes beside it)
    build(path, str(out), quantize=quantize, target="software")
    sess = InferenceSession(str(out))  # loading checks every shard's sha256
    assert len(sess.artifact.manifest["shards"]) >= (3 if quantize is None else 2)  # 16 MiB shards, spilled
    assert not [p for p in os.listdir(out.parent) if p.startswith(".webinfer-shards-")]  # the scratch is gone
    model = onnx.load(path)
    if quantize == "f16":  # onnxruntime on the weights rounded as the build stores them
        for init in model.graph.initializer:
            w = onnx.numpy_helper.to_array(init).astype(np.float16).astype(np.float32)
            init.CopyFrom(onnx.numpy_helper.from_array(w, init.name))
    x = np.random.default_rng(1).standard_normal((3, 1024)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=1e-4, atol=1e-4)


def test_truncated_external_data_is_one_line(tmp_path):
    path = external_model(str(tmp_path), k=64, n=256)
    data = tmp_path / "model.onnx.data"
    data.write_bytes(data.read_bytes()[:1000])
    with pytest.raises(WebinferError) as e:
        build(path, str(tmp_path / "o.wi"))
    assert "external data" in str(e.value) and "\n" not in str(e.value)
