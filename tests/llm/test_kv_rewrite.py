"""The KV-cache rewrite on its own: matched on the exporter's spelling, refused when the cache feeds
something that is not attention, absent when there is no cache."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import webinfer
from webinfer.errors import WebinferError
from webinfer.graph.importer import import_model
from webinfer.graph.llm import generation_rewrites, kv_cache


def test_matches_every_layer_of_the_exported_model(tiny_llama_dir):
    model = import_model(str(tiny_llama_dir / "model.onnx"))
    assert kv_cache.run(model, max_seq=64) == 2
    ops = [n.op_type for n in model.graph if n.domain == "webinfer"]
    assert ops == ["CachedAttention", "CachedAttention"]
    assert [o.name for o in model.graph.outputs] == ["logits"]
    meta = kv_cache.kv_metadata(model)
    assert meta["max_seq"] == 64 and len(meta["states"]) == 4 and meta["bounded"] == ["past_sequence", "total_sequence"]
    node = next(n for n in model.graph if n.op_type == "CachedAttention")
    assert node.attributes["scale"].as_float() == pytest.approx(1 / np.sqrt(16))  # head size 64 / 4 heads
    assert (node.attributes["q_heads"].as_int(), node.attributes["kv_heads"].as_int()) == (4, 2)


def _concat_only_model():
    past = helper.make_tensor_value_info("past_key_values.0.key", TensorProto.FLOAT, ["b", 2, "p", 4])
    new = helper.make_tensor_value_info("new", TensorProto.FLOAT, ["b", 2, "s", 4])
    present = helper.make_tensor_value_info("present.0.key", TensorProto.FLOAT, None)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Concat", ["past_key_values.0.key", "new"], ["present.0.key"], axis=-2),
             helper.make_node("Relu", ["present.0.key"], ["y"])]
    return helper.make_model(helper.make_graph(nodes, "g", [past, new], [y, present]),
                             opset_imports=[helper.make_opsetid("", 20)])


def test_refuses_a_cache_that_feeds_no_attention(tmp_path):
    model = _concat_only_model()
    assert kv_cache.is_kv_model(import_model(model))
    with pytest.raises(WebinferError, match="cannot build for generation: KV cache outputs"):
        webinfer.build(model, str(tmp_path / "x.wi"))


def test_no_cache_no_rewrite():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 20)])
    assert generation_rewrites(import_model(model), None) is None
    onnx.checker.check_model(model)


def _attention_model(between: str | None):
    """q [1, 2, s, 4] attends over Concat(past, k_new); ``between`` is an op inserted between q·kᵀ and the
    Softmax (None: the plain spelling)."""
    info = helper.make_tensor_value_info
    inputs = [info("q", TensorProto.FLOAT, [1, 2, "s", 4]), info("k_new", TensorProto.FLOAT, [1, 2, "s", 4]),
              info("past_key_values.0.key", TensorProto.FLOAT, [1, 2, "p", 4]),
              info("v_new", TensorProto.FLOAT, [1, 2, "s", 4]),
              info("past_key_values.0.value", TensorProto.FLOAT, [1, 2, "p", 4])]
    outputs = [info("logits", TensorProto.FLOAT, None), info("present.0.key", TensorProto.FLOAT, None),
               info("present.0.value", TensorProto.FLOAT, None)]
    nodes = [helper.make_node("Concat", ["past_key_values.0.key", "k_new"], ["present.0.key"], axis=-2),
             helper.make_node("Concat", ["past_key_values.0.value", "v_new"], ["present.0.value"], axis=-2),
             helper.make_node("Transpose", ["present.0.key"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["scores"])]
    if between:
        nodes.append(helper.make_node(between, ["scores"], ["scores2"]))
    nodes += [helper.make_node("Softmax", ["scores2" if between else "scores"], ["probs"], axis=-1),
              helper.make_node("MatMul", ["probs", "present.0.value"], ["logits"])]
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                             opset_imports=[helper.make_opsetid("", 20)])


def test_attention_without_mask_or_scale_is_matched():
    model = import_model(_attention_model(None))
    assert kv_cache.run(model, max_seq=16) == 1
    node = next(n for n in model.graph if n.op_type == "CachedAttention")
    assert node.attributes["scale"].as_float() == 1.0 and node.attributes["softcap"].as_float() == 0.0


def test_refusal_names_the_pattern_that_failed():
    with pytest.raises(kv_cache.KVCacheError) as e:
        kv_cache.run(import_model(_attention_model("Relu")), max_seq=16)
    assert "Softmax" in str(e.value) and "is not q·kᵀ" in str(e.value)
