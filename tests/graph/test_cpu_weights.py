"""The CPU model's smaller weights (graph/cpu_weights.py), run by onnxruntime CPU (with the CPU path's session
config) against independent references: int4 -- the source model with every quantized weight replaced by its
numpy dequantization (from the stored codes, scales and zero points, as the ONNX spec of DequantizeLinear reads
them), which must agree to float rounding, and the source model itself within the quantization's error; f16 --
the source model within float16 rounding of the weights."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from webinfer.errors import WebinferError
from webinfer.graph.cpu_weights import BLOCK, SESSION_CONFIG, quantize_cpu_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _tied_decoder(vocab=96, hidden=64, inner=160, seed=3):
    """ids -> embedding (Gather) -> two MatMuls -> logits through the transposed embedding (a tied head)."""
    rng = np.random.default_rng(seed)
    emb = rng.standard_normal((vocab, hidden)).astype(np.float32)
    up = (rng.standard_normal((hidden, inner)) * 0.2).astype(np.float32)
    down = (rng.standard_normal((inner, hidden)) * 0.2).astype(np.float32)
    norm = np.ones(hidden, np.float32)
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["e"]), helper.make_node("MatMul", ["e", "up"], ["u"]),
             helper.make_node("Tanh", ["u"], ["t"]), helper.make_node("MatMul", ["t", "down"], ["d"]),
             helper.make_node("Mul", ["d", "norm"], ["h"]),
             helper.make_node("Transpose", ["emb"], ["embT"], perm=[1, 0]),
             helper.make_node("MatMul", ["h", "embT"], ["logits"])]
    graph = helper.make_graph(nodes, "tied", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, "s"])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "s", vocab])],
                              [numpy_helper.from_array(a, n) for a, n in
                               ((emb, "emb"), (up, "up"), (down, "down"), (norm, "norm"))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _run(model, feeds):
    options = ort.SessionOptions()
    for key, value in SESSION_CONFIG.items():
        options.add_session_config_entry(key, value)
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def _dequantized(model) -> dict[str, np.ndarray]:
    """{weight name: (code - zero) * scale}, each DequantizeLinear's blocks spread along its axis (numpy)."""
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}  # (onnx unpacks uint4)
    out = {}
    for node in model.graph.node:
        if node.op_type != "DequantizeLinear":
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        assert attrs["block_size"] == BLOCK
        codes, scale, zero = (inits[name] for name in node.input)
        axis, n = attrs["axis"], codes.shape[attrs["axis"]]
        spread = [np.repeat(a.astype(np.float32), BLOCK, axis).take(range(n), axis) for a in (scale, zero)]
        out[node.output[0]] = (codes.astype(np.float32) - spread[1]) * spread[0]
    return out


FEEDS = {"ids": np.array([[0, 5, 95, 17, 5]], np.int64)}


def _equals_its_dequantization(source, q) -> tuple[np.ndarray, np.ndarray]:
    """Checks ``q`` against ``source`` with every quantized weight replaced by its numpy dequantization; returns
    (q's logits, the source's) on FEEDS."""
    deq = _dequantized(q)
    ref = onnx.ModelProto()
    ref.CopyFrom(source)
    for init in ref.graph.initializer:
        if init.name in deq:
            init.CopyFrom(numpy_helper.from_array(deq[init.name], init.name))
    got, want, exact = _run(q, FEEDS), _run(ref, FEEDS), _run(source, FEEDS)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    return got, exact


def test_int4_equals_the_source_with_its_weights_dequantized():
    source = _tied_decoder()
    q = quantize_cpu_model(source, "int4")
    dq = [n for n in q.graph.node if n.op_type == "DequantizeLinear"]
    assert sorted(n.output[0] for n in dq) == ["down", "emb", "up"]  # (the tied table stored once)
    kinds = {i.name: i.data_type for i in q.graph.initializer}
    assert kinds["up_q4"] == kinds["down_q4"] == TensorProto.UINT4 and kinds["emb_q8"] == TensorProto.UINT8
    assert {o.version for o in q.opset_import if o.domain == ""} == {21}
    assert len(q.SerializeToString()) < len(source.SerializeToString()) / 3
    got, exact = _equals_its_dequantization(source, q)
    assert np.linalg.norm(got - exact) < 0.15 * np.linalg.norm(exact)  # (4 bits: close, not equal)


def test_int8_stores_every_weight_at_8_bits_and_equals_its_dequantization():
    source = _tied_decoder()
    q = quantize_cpu_model(source, "int8")
    kinds = {i.name: i.data_type for i in q.graph.initializer}
    assert kinds["up_q8"] == kinds["down_q8"] == kinds["emb_q8"] == TensorProto.UINT8
    got, exact = _equals_its_dequantization(source, q)
    int4 = _run(quantize_cpu_model(source, "int4"), FEEDS)
    # (8 bits: a 17th of int4's step, on the MatMul weights; the table is at 8 bits in both)
    assert np.linalg.norm(got - exact) < 0.2 * np.linalg.norm(int4 - exact)


def test_an_odd_length_axis_and_a_block_across_zero():
    """A reduced axis of 45 (the last block partial) and weights all positive (the range still takes in 0)."""
    rng = np.random.default_rng(5)
    w = (rng.random((45, 33)) + 0.5).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "odd",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 45])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 33])],
                              [numpy_helper.from_array(w, "w")])
    source = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    q = quantize_cpu_model(source, "int4")
    x = rng.standard_normal((2, 45)).astype(np.float32)
    np.testing.assert_allclose(_run(q, {"x": x}), x @ _dequantized(q)["w"], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(_dequantized(q)["w"], w, atol=1.6 / 15 / 2 + 1e-6)  # (half a step of [0, 1.5])


def test_f16_storage_is_float32_arithmetic_on_rounded_weights():
    source = _tied_decoder()
    half = quantize_cpu_model(source, "f16")
    assert {i.data_type for i in half.graph.initializer} == {TensorProto.FLOAT16, TensorProto.FLOAT}
    assert len(half.SerializeToString()) < 0.55 * len(source.SerializeToString())
    ref = onnx.ModelProto()
    ref.CopyFrom(source)
    for init in ref.graph.initializer:
        a = numpy_helper.to_array(init)
        if a.size >= 1024:
            init.CopyFrom(numpy_helper.from_array(a.astype(np.float16).astype(np.float32), init.name))
    feeds = {"ids": np.array([[1, 2, 3]], np.int64)}
    np.testing.assert_allclose(_run(half, feeds), _run(ref, feeds), rtol=1e-5, atol=1e-5)
    assert quantize_cpu_model(source, "f32") is source
    with pytest.raises(WebinferError, match="choose from"):
        quantize_cpu_model(source, "int3")


def test_an_int4_decoder_build_carries_an_int4_cpu_model(tmp_path):
    """`build --quantize int4 --cpu` of a tiny Llama exported like SmolLM2: its CPU model keeps the source's
    past/present interface (onnxruntime's inputs and outputs) with every MatMul weight dequantized from int4;
    --cpu-weights overrides the default, and an unknown format is one clear error."""
    from tiny_llama import TINY, tiny_llama

    import webinfer

    folder = tiny_llama(TINY)
    manifest = webinfer.build(str(folder / "model.onnx"), str(tmp_path / "t.wi"), quantize="int4", cpu=True,
                              max_seq=64)
    note = manifest["cpu_model"]
    assert note["weights"] == "int4" and note["generation"] == "past/present"
    data = (tmp_path / "t.wi" / "assets" / "cpu-model.onnx").read_bytes()
    assert len(data) == note["bytes"] < (folder / "model.onnx").stat().st_size * 0.6
    model = onnx.load_from_string(data)
    assert not any(n.op_type == "MatMul" and n.input[1] in {i.name for i in model.graph.initializer}
                   for n in model.graph.node)
    assert sum(n.op_type == "DequantizeLinear" for n in model.graph.node) >= 2 * 7 + 1  # 7 a layer, the table
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    src = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
    assert [(i.name, i.type) for i in sess.get_inputs()] == [(i.name, i.type) for i in src.get_inputs()]
    assert [o.name for o in sess.get_outputs()] == [o.name for o in src.get_outputs()]
    m2 = webinfer.build(str(folder / "model.onnx"), str(tmp_path / "f.wi"), quantize="int4", cpu=True,
                        cpu_weights="f32", max_seq=64)
    assert m2["cpu_model"]["weights"] == "f32"
    with pytest.raises(WebinferError, match="--cpu-weights"):
        webinfer.build(str(folder / "model.onnx"), str(tmp_path / "x.wi"), cpu=True, cpu_weights="int2")


def test_the_runtime_sets_the_same_session_config():
    from webinfer.runtime import cpu

    assert cpu.SESSION_CONFIG == SESSION_CONFIG


def test_the_cli_flag(tmp_path):
    """`webinfer build --cpu --cpu-weights f16` stores a float16 CPU model and says so; a bad value is refused by
    the parser in one line."""
    import subprocess

    onnx.save(_tied_decoder(), str(tmp_path / "m.onnx"))
    cmd = [sys.executable, "-m", "webinfer.cli", "build", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "m.wi"),
           "--cpu", "--cpu-weights", "f16"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "CPU path: assets/cpu-model.onnx" in r.stdout and "f16 weights" in r.stdout
    stored = onnx.load(str(tmp_path / "m.wi" / "assets" / "cpu-model.onnx"))
    assert TensorProto.FLOAT16 in {i.data_type for i in stored.graph.initializer}
    bad = subprocess.run(cmd[:-1] + ["int2"], capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "--cpu-weights" in bad.stderr
