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
