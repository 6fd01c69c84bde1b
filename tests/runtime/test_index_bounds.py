"""Indices outside a table are an error, as in onnxruntime ("indices element out of data bounds"): the build
records which inputs index which table (graph/index_bounds.py) and the runtime checks the fed values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import webinfer
from webinfer.errors import WebinferError
from webinfer.llm.generate import Generator
from webinfer.runtime.inference import InferenceSession

DECODER = Path(__file__).parents[1] / "llm" / "data" / "decoders" / "llama-dynamo.onnx"


def _embedding_model():
    table = numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4), "table")
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 4])
    nodes = [helper.make_node("Cast", ["ids"], ["ids32"], to=TensorProto.INT32),
             helper.make_node("Gather", ["table", "ids32"], ["out"], axis=0)]
    return helper.make_model(helper.make_graph(nodes, "g", [ids], [out], [table]),
                             opset_imports=[helper.make_opsetid("", 20)])


def test_gather_indices_checked_against_the_table(tmp_path):
    model = _embedding_model()
    art = tmp_path / "emb.wi"
    manifest = webinfer.build(model, str(art))
    assert manifest["index_bounds"] == {"ids": 10}
    sess = InferenceSession(str(art))
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ok = np.array([0, 9, -1, -10], np.int64)  # ONNX allows negative indices from the end
    np.testing.assert_array_equal(np.asarray(sess.run(None, {"ids": ok})[0]).reshape(4, 4),
                                  ref.run(None, {"ids": ok})[0])
    for bad in (10, -11, 1 << 20):
        with pytest.raises(Exception, match="out of data bounds|out of bounds"):
            ref.run(None, {"ids": np.array([1, bad], np.int64)})
        with pytest.raises(WebinferError, match=f"index {bad} is out of range for a table of 10 rows"):
            sess.run(None, {"ids": np.array([1, bad], np.int64)})


def test_token_ids_outside_the_vocabulary_are_refused(tmp_path):
    art = tmp_path / "llama.wi"
    webinfer.build(str(DECODER), str(art), max_seq=64)
    gen = Generator.load(str(art))
    with pytest.raises(WebinferError, match="index 256 is out of range for a table of 256 rows"):
        next(gen.generate([5, 256, 7], max_new_tokens=2, stop_at_eos=False))
    assert len(list(gen.generate([5, 255, 7], max_new_tokens=2, stop_at_eos=False))) == 2
