"""The run side's output formats (runtime/ml_outputs.py) on HostTensors (Pyodide, no numpy) give what the numpy
path gives, and the manifest refuses a malformed ``output_formats`` block in one line."""

from __future__ import annotations

import copy
import types

import numpy as np
import pytest

from webinfer.errors import WebinferError
from webinfer.format.output_formats import OutputFormat
from webinfer.runtime import ml_outputs
from webinfer.runtime.tensor import HostTensor


def test_host_tensors_format_as_numpy_arrays_do():
    spec = types.SimpleNamespace(output_formats=(OutputFormat("label", "labels", ("setosa", "versicolor")),
                                                 OutputFormat("probs", "zipmap", (0, 7))))
    label = np.array([1, 0, 1], np.int64)
    probs = np.array([[0.25, 0.75], [0.5, 0.5], [1.0, 0.0]], np.float32)
    arrays = ml_outputs.present(spec, ["label", "probs", "other"], [label, probs, probs])
    hosts = ml_outputs.present(spec, ["label", "probs", "other"],
                               [HostTensor("int64", label.shape, label.tobytes()),
                                HostTensor("float32", probs.shape, probs.tobytes()), probs])
    assert list(arrays[0]) == ["versicolor", "setosa", "versicolor"]
    assert arrays[1] == [{0: 0.25, 7: 0.75}, {0: 0.5, 7: 0.5}, {0: 1.0, 7: 0.0}]
    assert arrays[2] is probs
    assert list(hosts[0]) == list(arrays[0]) and hosts[1] == arrays[1]


@pytest.mark.parametrize("block,why", [
    ([{"output": "y", "kind": "dict", "labels": []}], "kind"),
    ([{"output": "y", "kind": "labels", "labels": [1, 2]}], "strings"),
    ([{"output": "y", "kind": "zipmap", "labels": [True]}], "string or an integer"),
    ([{"output": "y", "kind": "zipmap", "labels": []}, {"output": "y", "kind": "zipmap", "labels": []}], "twice"),
    ([{"output": "y", "kind": "zipmap"}], "labels"),
])
def test_malformed_blocks_are_refused(block, why, tmp_path):
    from onnx import TensorProto, helper

    from webinfer.build import build
    from webinfer.format.manifest import parse_manifest

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    manifest = build(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), str(tmp_path / "a"),
                     target="software")
    manifest = {k: v for k, v in manifest.items() if k not in ("build_seconds", "cpu_model")}
    parse_manifest(copy.deepcopy(manifest), "m")  # (as built: accepted)
    with pytest.raises(WebinferError, match=why):
        parse_manifest({**manifest, "output_formats": block}, "m")


def test_cpu_path_formats_as_onnxruntime_does(tmp_path):
    """``device="cpu"`` runs the CPU model, whose ZipMap and string labels are rewritten to tensors (so that
    onnxruntime-web can read them): its outputs still come back as onnxruntime gives the source model's."""
    pytest.importorskip("sklearn")
    skl2onnx = pytest.importorskip("skl2onnx")
    import onnx
    import onnxruntime as ort
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    from webinfer.build import build
    from webinfer.runtime.inference import InferenceSession

    X, y = load_iris(return_X_y=True)
    X = X.astype(np.float32)
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    model = skl2onnx.to_onnx(LogisticRegression(max_iter=500).fit(X, names), X[:1],
                             target_opset={"": 18, "ai.onnx.ml": 3})
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    build(path, str(tmp_path / "m.wi"), target="software", cpu=True)
    cpu_model = onnx.load(str(tmp_path / "m.wi" / "assets" / "cpu-model.onnx"))
    assert all(o.type.HasField("tensor_type") for o in cpu_model.graph.output)
    rows = X[::15]
    want_labels, want_probs = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"X": rows})
    labels, probs = InferenceSession(str(tmp_path / "m.wi"), device="cpu").run(None, {"X": rows})
    assert list(labels) == list(want_labels)
    assert [sorted(p) for p in probs] == [sorted(p) for p in want_probs]
    np.testing.assert_allclose([[p[k] for k in sorted(p)] for p in probs],
                               [[p[k] for k in sorted(p)] for p in want_probs], rtol=1e-6, atol=1e-7)
