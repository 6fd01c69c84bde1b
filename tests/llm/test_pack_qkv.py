"""graph/llm/pack_qkv.py: a decoder layer's q, k and v projections become one matmul whose rows the cached
attention reads whole. The generated ids of every packed fixture are compared with onnxruntime's in
test_decoder_matrix.py; here, which layers are packed and what the packed graph looks like."""

from pathlib import Path

import onnx
import pytest
from onnx import numpy_helper

import webinfer

DATA = Path(__file__).parent / "data" / "decoders"


def _optimized(name: str, tmp_path) -> onnx.ModelProto:
    webinfer.build(str(DATA / f"{name}.onnx"), str(tmp_path / "a.wi"), max_seq=64, target="software",
                   save_optimized=str(tmp_path / "opt.onnx"))
    return onnx.load(str(tmp_path / "opt.onnx"))


def _attrs(node) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


# dynamo and optimum spellings; qwen2 has q/k/v biases; optimum's k is also read by a Shape (its readers get a
# Slice of the packed rows, which lowers to no kernel); phi3's export packs them itself (three Slices)
@pytest.mark.parametrize("name", ["llama-dynamo", "llama-optimum", "qwen2-dynamo", "gemma2-optimum", "phi3-optimum"])
def test_projections_are_packed(name, tmp_path):
    model = _optimized(name, tmp_path)
    producer = {o: n for n in model.graph.node for o in n.output}
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    layers = [n for n in model.graph.node if n.op_type == "CachedAttention"]
    assert layers
    for node in layers:
        a = _attrs(node)
        assert a.get("packed_qkv") == 1
        assert node.input[0] == node.input[1] == node.input[2]
        rows = producer[node.input[0]]
        assert rows.op_type == "Reshape"
        mm = producer[rows.input[0]]  # the merged projection, or phi3's own (its q/k/v Slices gone)
        # stored N-major for decode (graph/quantize.py); the packed biases, if any, fused as its epilogue
        assert mm.op_type in ("MatMulQ", "FusedMatMulQ") and _attrs(mm)["format"] == b"f32"
        columns = inits[mm.input[1]].shape[0]
        head = columns // (a["q_heads"] + 2 * a["kv_heads"])
        assert columns == (a["q_heads"] + 2 * a["kv_heads"]) * head


@pytest.mark.parametrize("name", ["qwen3-dynamo"])
def test_layers_that_do_not_fit_stay_as_they_are(name, tmp_path):
    """qwen3 normalizes q and k per head between projection and attention."""
    model = _optimized(name, tmp_path)
    layers = [n for n in model.graph.node if n.op_type == "CachedAttention"]
    assert layers and all(_attrs(n).get("packed_qkv", 0) == 0 for n in layers)
    assert all(len(set(n.input[:3])) == 3 for n in layers)
