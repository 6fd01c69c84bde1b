"""InferenceSession(path, device="cpu"): the artifact's CPU model (build --cpu) runs with onnxruntime, no GPU
adapter; checked against numpy and onnx.reference, and the clear errors around it."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import webinfer
from webinfer.errors import WebinferError
from webinfer.runtime.inference import InferenceSession


def _model(tmp_path):
    """x[batch, 6] float32 -> y = relu(x @ w + b); ids[batch, 2] int64 -> e = table[ids]."""
    rng = np.random.default_rng(3)
    w, b = rng.standard_normal((6, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    table = rng.standard_normal((9, 4)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["g"]), helper.make_node("Relu", ["g"], ["y"]),
         helper.make_node("Gather", ["table", "ids"], ["e"])], "cpu-device",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6]),
         helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3]),
         helper.make_tensor_value_info("e", TensorProto.FLOAT, ["batch", 2, 4])],
        [numpy_helper.from_array(a, n) for a, n in ((w, "w"), (b, "b"), (table, "table"))])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path, w, b, table


def test_cpu_device_runs_the_cpu_model(tmp_path):
    path, w, b, table = _model(tmp_path)
    manifest = webinfer.build(str(path), str(tmp_path / "m.wi"), cpu=True)
    stored = tmp_path / "m.wi" / "assets" / "cpu-model.onnx"
    assert manifest["cpu_model"] == {"file": "assets/cpu-model.onnx", "bytes": stored.stat().st_size,
                                     "weights": "f32"}
    assert onnx.load(str(stored)).graph == onnx.load(str(path)).graph  # the source graph, standard ONNX
    s = InferenceSession(str(tmp_path / "m.wi"), device="cpu")
    # x and ids never meet, but the declared outputs y and e carry "batch": it stays one name
    # (graph/passes/split_input_dims.py)
    assert [(i.name, i.dtype, i.shape) for i in s.get_inputs()] == [("x", "float32", ["batch", 6]),
                                                                  ("ids", "int64", ["batch", 2])]
    assert [o.name for o in s.get_outputs()] == ["y", "e"]
    x = np.linspace(-3, 3, 18).reshape(3, 6)  # float64 and int32 feeds: converted to the model's types
    ids = np.array([[0, 8], [4, 4], [7, 1]], np.int32)
    y, e = s.run(None, {"x": x, "ids": ids})
    np.testing.assert_allclose(y, np.maximum(x.astype(np.float32) @ w + b, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(e, table[ids])
    ref = ReferenceEvaluator(str(path)).run(["e"], {"x": x.astype(np.float32), "ids": ids.astype(np.int64)})
    np.testing.assert_array_equal(e, ref[0])
    assert [a.shape for a in s.run(["e"], {"x": x, "ids": ids})] == [(3, 2, 4)]
    with pytest.raises(WebinferError, match="missing feed for input 'ids'"):
        s.run(None, {"x": x})
    with pytest.raises(WebinferError, match="unknown input 'z'"):
        s.run(None, {"x": x, "ids": ids, "z": x})


def test_cpu_device_errors(tmp_path):
    path, *_ = _model(tmp_path)
    manifest = webinfer.build(str(path), str(tmp_path / "plain.wi"))
    assert "cpu_model" not in manifest and not (tmp_path / "plain.wi" / "assets").exists()
    with pytest.raises(WebinferError, match="carries no CPU model \\(build it with --cpu\\)"):
        InferenceSession(str(tmp_path / "plain.wi"), device="cpu")
    webinfer.build(str(path), str(tmp_path / "m.wi"), cpu=True)
    # Without onnxruntime: one clear line from the CLI, no traceback.
    code = ("import sys; sys.modules['onnxruntime'] = None; from webinfer.cli import main; "
            f"sys.exit(main(['run', {str(tmp_path / 'm.wi')!r}, '--device', 'cpu']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert r.stderr.strip() == 'webinfer: error: device="cpu" needs onnxruntime (pip install onnxruntime)'


def test_a_decoder_built_for_generation_carries_its_source_decoder(tmp_path):
    """The GPU graph of a decoder built for generation takes other inputs (sampling, KV state); the CPU model is
    the source decoder with its past/present interface (the CPU path's generation loop feeds it): the same
    inputs, outputs and logits as onnxruntime on the source."""
    import numpy as np
    import onnxruntime as ort
    import tiny_llama

    model = tiny_llama.tiny_llama(tiny_llama.TINY_CHAT)
    manifest = webinfer.build(str(model / "model.onnx"), str(tmp_path / "chat.wi"), cpu=True, max_seq=64)
    assert manifest["cpu_model"]["generation"] == "past/present"
    stored = ort.InferenceSession(str(tmp_path / "chat.wi" / "assets" / "cpu-model.onnx"))
    source = ort.InferenceSession(str(model / "model.onnx"))
    assert [(i.name, i.shape) for i in stored.get_inputs()] == [(i.name, i.shape) for i in source.get_inputs()]
    assert [o.name for o in stored.get_outputs()] == [o.name for o in source.get_outputs()]
    feeds = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32) for i in source.get_inputs()
             if i.name.startswith("past_key_values.")}
    feeds.update(input_ids=np.array([[5, 9, 2]], np.int64), attention_mask=np.ones((1, 3), np.int64),
                 position_ids=np.arange(3)[None])
    feeds = {k: v for k, v in feeds.items() if k in {i.name for i in source.get_inputs()}}
    np.testing.assert_array_equal(stored.run(["logits"], feeds)[0], source.run(["logits"], feeds)[0])
