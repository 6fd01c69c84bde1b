"""scripts/fetch_zoo.py on a model whose weights are external data (torch's exporters write ``model.onnx.data``
beside ``model.onnx`` and packages ship both): the data members are extracted beside the model under the file
name the model names them by, so onnxruntime (the reference) and webinfer both load the weights. The archive is
a local zip placed in the cache, so nothing is downloaded; onnxruntime's output must equal numpy's."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import zipfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_fetch_zoo():
    spec = importlib.util.spec_from_file_location("fetch_zoo", os.path.join(ROOT, "scripts", "fetch_zoo.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fetch_extracts_external_data_beside_the_model(tmp_path, monkeypatch):
    w = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 32])],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    src = tmp_path / "src"
    src.mkdir()
    onnx.save(model, str(src / "net.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="net.onnx.data", size_threshold=0)
    assert (src / "net.onnx.data").stat().st_size >= w.nbytes
    cache = tmp_path / "cache"
    (cache / "archives").mkdir(parents=True)
    archive = cache / "archives" / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(archive, "w") as z:
        z.write(src / "net.onnx", "pkg/models/net.onnx")
        z.write(src / "net.onnx.data", "pkg/models/net.onnx.data")
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    zoo = {"archives": {"pkg": {"registry": "pypi", "name": "pkg", "version": "1.0", "file": archive.name,
                                "sha256": digest, "size": archive.stat().st_size, "license": "MIT"}},
           "models": [{"id": "net-ext", "package": "pkg", "member": "pkg/models/net.onnx",
                       "data": ["pkg/models/net.onnx.data"], "task": "t", "input": {"recipe": "iris"}}]}
    zoo_json = tmp_path / "models.json"
    zoo_json.write_text(json.dumps(zoo))
    fz = load_fetch_zoo()
    monkeypatch.setattr(fz, "ZOO_JSON", zoo_json)

    [path] = fz.fetch(cache, quiet=True)
    assert path == cache / "models" / "net-ext.onnx"
    assert (cache / "models" / "net.onnx.data").read_bytes() == (src / "net.onnx.data").read_bytes()
    x = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32)
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, x @ w, rtol=1e-5, atol=1e-5)

    (cache / "models" / "net.onnx.data").unlink()  # a data file gone: the next fetch extracts it again
    fz.fetch(cache, quiet=True)
    assert (cache / "models" / "net.onnx.data").is_file()


def test_fetch_extracts_a_model_zipped_inside_a_member(tmp_path, monkeypatch):
    """napari-czann-segment ships its model as a .czseg member, itself a zip holding ``<uuid>.model`` (ONNX)."""
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    blob = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    inner = tmp_path / "net.czseg"
    with zipfile.ZipFile(inner, "w") as z:
        z.writestr("meta.xml", "<Model/>")
        z.writestr("abc.model", blob)
    cache = tmp_path / "cache"
    (cache / "archives").mkdir(parents=True)
    archive = cache / "archives" / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(archive, "w") as z:
        z.write(inner, "pkg/_data/net.czseg")
    zoo = {"archives": {"pkg": {"registry": "pypi", "name": "pkg", "version": "1.0", "file": archive.name,
                                "sha256": hashlib.sha256(archive.read_bytes()).hexdigest(),
                                "size": archive.stat().st_size, "license": "MIT"}},
           "models": [{"id": "net-inner", "package": "pkg", "member": "pkg/_data/net.czseg", "inner": ["abc.model"],
                       "task": "t", "input": {"recipe": "iris"}}]}
    zoo_json = tmp_path / "models.json"
    zoo_json.write_text(json.dumps(zoo))
    fz = load_fetch_zoo()
    monkeypatch.setattr(fz, "ZOO_JSON", zoo_json)
    [path] = fz.fetch(cache, quiet=True)
    assert path.read_bytes() == blob
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, np.maximum(x, 0))
