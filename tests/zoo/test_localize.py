"""The zoo's node-by-node check (benchmarks/zoo/localize.py), on a small int8 Q/DQ network.

It decides whether a zoo mismatch on an ill-conditioned quantized model (smart-turn-v3.2: onnxruntime's own
optimized and unoptimized runs differ by 27 %) is webinfer's fault, so it must both pass a correct build and
name the node whose value is wrong; the reference is onnxruntime running each node alone.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from benchmarks.zoo.inputs import Recipes  # noqa: E402
from benchmarks.zoo.localize import (  # noqa: E402
    LOCAL_TOLERANCE,
    ULPS,
    check_nodes,
    first_wrong,
    float_values,
    localize,
    perturbed,
)
from benchmarks.zoo.worker import TOLERANCE, default_cache, load_zoo  # noqa: E402


def qdq_net(seed: int = 0) -> onnx.ModelProto:
    """x -> Q/DQ -> MatMul(int8 weight) -> Add -> Q/DQ -> Erf-GELU -> MatMul -> Softmax, opset 18."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(a, n) for n, a in [
        ("w1_q", rng.integers(-127, 128, (16, 24)).astype(np.int8)), ("w1_s", np.float32(0.01)),
        ("w2_q", rng.integers(-127, 128, (24, 8)).astype(np.int8)), ("w2_s", np.float32(0.02)),
        ("zp", np.int8(0)), ("xs", np.float32(0.02)), ("hs", np.float32(0.05)),
        ("b1", rng.standard_normal(24).astype(np.float32)), ("sqrt2", np.float32(np.sqrt(2))),
        ("one", np.float32(1)), ("half", np.float32(0.5))]]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "zp"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "zp"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w1_q", "w1_s", "zp"], ["w1"]),
        helper.make_node("DequantizeLinear", ["w2_q", "w2_s", "zp"], ["w2"]),
        helper.make_node("MatMul", ["xd", "w1"], ["m1"]),
        helper.make_node("Add", ["m1", "b1"], ["h"]),
        helper.make_node("QuantizeLinear", ["h", "hs", "zp"], ["hq"]),
        helper.make_node("DequantizeLinear", ["hq", "hs", "zp"], ["hd"]),
        helper.make_node("Div", ["hd", "sqrt2"], ["g0"]),
        helper.make_node("Erf", ["g0"], ["g1"]),
        helper.make_node("Add", ["g1", "one"], ["g2"]),
        helper.make_node("Mul", ["g2", "half"], ["g3"]),
        helper.make_node("Mul", ["hd", "g3"], ["gelu"]),
        helper.make_node("MatMul", ["gelu", "w2"], ["m2"]),
        helper.make_node("Softmax", ["m2"], ["y"], axis=-1),
    ]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 8])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def feeds(seed: int = 1) -> dict:
    return {"x": np.random.default_rng(seed).standard_normal((3, 16)).astype(np.float32)}


def reference_values(proto, names, x) -> dict:
    """Every named value from one onnxruntime run of the whole graph (graph optimizations off)."""
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    del model.graph.output[:]
    model.graph.output.extend(helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in names)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    got = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(names, x)
    return dict(zip(names, got))


def test_float_values_are_the_float_node_outputs():
    names = float_values(qdq_net())
    assert "xq" not in names and "hq" not in names  # int8
    assert {"xd", "w1", "m1", "h", "hd", "gelu", "m2", "y"} <= set(names)


def test_a_tampered_value_is_named_as_the_first_wrong_node():
    proto, x = qdq_net(), feeds()
    names = float_values(proto)
    values = reference_values(proto, names, x)
    rows = check_nodes(proto, x, values)
    assert len(rows) == len(names)
    assert first_wrong(rows) is None, rows
    bad = dict(values)
    bad["g1"] = values["g1"] * np.float32(1.01)  # a wrong Erf; the nodes after it see the wrong value as input
    wrong = first_wrong(check_nodes(proto, x, bad))
    assert wrong is not None and wrong["op"] == "Erf" and wrong["output"] == "g1"
    assert wrong["rel"] > LOCAL_TOLERANCE


def test_webinfer_passes_the_node_check_on_a_qdq_net():
    proto, x = qdq_net(), feeds()
    rows = localize(proto, x, target="software")
    assert rows is not None and len(rows) == len(float_values(proto))
    assert first_wrong(rows) is None, max(rows, key=lambda r: r["rel"])


@pytest.mark.slow
def test_smart_turn_is_ill_conditioned_but_every_node_is_right():
    """Issue 34: smart-turn-v3.2's logit differs from onnxruntime's by ~10 %, yet no node is wrong."""
    model_id = "smart-turn-v3.2"
    path = default_cache() / "models" / f"{model_id}.onnx"
    assert path.is_file(), f"{path} is missing: run scripts/fetch_zoo.py (scripts/setup.sh does)"
    entry = next(m for m in load_zoo()["models"] if m["id"] == model_id)
    optimized = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = Recipes(default_cache()).make(entry, optimized.get_inputs())
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    plain = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    a, b = optimized.run(None, x)[0], plain.run(None, x)[0]
    assert np.abs(a - b).max() > 100 * TOLERANCE * np.abs(a).max()  # onnxruntime disagrees with itself
    rows = localize(onnx.load(str(path)), x, target="software")
    assert rows is not None and len(rows) > 250
    assert first_wrong(rows) is None, max(rows, key=lambda r: r["rel"])


def test_a_node_nearer_the_float64_value_than_onnxruntime_is_right():
    """onnxruntime's GlobalAveragePool sums 512 x 512 near-constant values in one float32 chain and is off by
    ~5e-4 of the mean (an EfficientNet U-Net's squeeze-excite on a photo): a value nearer the float64 mean is
    not wrong, whatever onnxruntime says; one off the float64 mean by more than onnxruntime still is."""
    x = (7.3 + np.random.default_rng(3).random((1, 4, 512, 512)) * 0.01).astype(np.float32)
    graph = helper.make_graph([helper.make_node("GlobalAveragePool", ["x"], ["y"], name="gap")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 1, 1])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    exact = x.astype(np.float64).mean(axis=(2, 3), keepdims=True)
    ort_value = reference_values(proto, ["y"], {"x": x})["y"]
    ort_off = float(np.abs(ort_value - exact).max() / exact.max())
    assert ort_off > LOCAL_TOLERANCE  # onnxruntime alone would call the exact value wrong
    [row] = check_nodes(proto, {"x": x}, {"y": exact.astype(np.float32)})
    assert row["rel"] > LOCAL_TOLERANCE and row["rel_exact"] < 1e-6
    assert first_wrong([row]) is None, row
    [bad] = check_nodes(proto, {"x": x}, {"y": (exact * (1 + 3 * ort_off)).astype(np.float32)})
    assert first_wrong([bad]) is bad


def test_a_node_is_wrong_only_past_what_rounding_noise_moves_onnxruntime():
    rows = [{"node": "a", "op": "MatMul", "output": "m", "rel": 1e-6},
            {"node": "l", "op": "DynamicQuantizeLSTM", "output": "y", "rel": 0.2, "spread": 0.5},
            {"node": "e", "op": "Erf", "output": "g", "rel": 0.01, "spread": 1e-6}]
    assert first_wrong(rows)["node"] == "e"
    assert first_wrong(rows[:2]) is None
    rows[1]["spread"] = 0.05  # onnxruntime moves by a quarter of the error only: wrong
    assert first_wrong(rows)["node"] == "l"


def test_perturbed_feeds_are_rounding_noise_on_floats_only():
    x = {"x": np.linspace(-3, 3, 1000, dtype=np.float32), "ids": np.arange(5, dtype=np.int64)}
    y = perturbed(x, 1)
    assert y["x"].dtype == np.float32 and (y["ids"] == x["ids"]).all()
    rel = np.abs(y["x"] - x["x"]) / np.maximum(np.abs(x["x"]), 1e-30)
    assert 0 < rel.max() < 10 * ULPS and (y["x"] != x["x"]).mean() > 0.9


@pytest.mark.slow
def test_a_uint8_state_lstm_is_ill_conditioned_but_every_node_is_right():
    """text2tashkeel's BiLSTM (DynamicQuantizeLSTM: H rounded to uint8 every step): one step's rounding flip
    diverges, so webinfer's logits differ from onnxruntime's by ~1 %, yet onnxruntime itself moves as far when the
    LSTM's inputs get rounding noise, and every other node equals onnxruntime's on webinfer's inputs."""
    model_id = "tashkeel-bilstm-int8"
    path = default_cache() / "models" / f"{model_id}.onnx"
    assert path.is_file(), f"{path} is missing: run scripts/fetch_zoo.py (scripts/setup.sh does)"
    entry = next(m for m in load_zoo()["models"] if m["id"] == model_id)
    x = Recipes(default_cache()).make(entry, ort.InferenceSession(str(path)).get_inputs())
    rows = localize(onnx.load(str(path)), x, target="software")
    assert rows is not None and len(rows) > 40
    assert first_wrong(rows) is None, max(rows, key=lambda r: r["rel"])
    flagged = [r for r in rows if r["rel"] > LOCAL_TOLERANCE]
    assert all(r["op"] == "DynamicQuantizeLSTM" or r["spread"] > LOCAL_TOLERANCE for r in flagged), flagged
