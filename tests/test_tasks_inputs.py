"""What a user hands the one-call tasks beyond the documented happy path: a ``pathlib.Path``, an empty batch,
something that is no image or text at all. Each either works as onnxruntime/sentence-transformers would or is
refused in one line (WebinferError), never a stray TypeError/ValueError from inside."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from PIL import Image

from tests.graph.test_prepost import MEAN, STD, classifier_model, image, preprocess_reference
from webinfer.build import build
from webinfer.errors import WebinferError
from webinfer.llm.embeddings import Embedder
from webinfer.tasks import pipeline


def test_image_tasks_take_a_path_object_and_refuse_non_images(tmp_path):
    model = classifier_model()
    pre = {"resize": {"shorter": 18}, "crop": [16, 16], "mean": MEAN, "std": STD}
    art = str(tmp_path / "cls.wi")
    build(model, art, preprocess=pre, postprocess={"softmax": True, "top_k": 3}, target="software")
    rgba = image(25, 31)
    Image.fromarray(rgba).save(tmp_path / "x.png")
    logits = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": preprocess_reference(rgba, pre)})[0][0]
    classify = pipeline("image-classification", art)
    got = classify(Path(tmp_path / "x.png"))
    assert [label for label, _ in got] == [str(i) for i in np.argsort(-logits)[:3]]
    for bad, why in ((42, "got int"), (None, "got NoneType"), ((tmp_path / "x.png").read_bytes(), "pass its path")):
        with pytest.raises(WebinferError, match=why):
            classify(bad)


def test_embeddings_of_nothing_and_of_non_text():
    """sentence-transformers' encode([]) gives no vectors; a number is no text (the check comes before any run)."""
    embed = Embedder(run=None, inputs=[], tokenizer=None)
    assert embed([]) == [] and embed.n_tokens == 0
    for bad in (5, None, [1.5], {"text": "a"}):
        with pytest.raises(WebinferError, match="expected a string or a list of strings"):
            embed(bad)


def test_session_arguments_are_checked_in_one_line(tmp_path):
    """device="gpu" is the default device (as ``webinfer run --device gpu``); another string or feeds that are
    no dict are the caller's error, said in one line."""
    import onnx
    from onnx import TensorProto, helper

    from webinfer.runtime.inference import InferenceSession

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), str(tmp_path / "m.onnx"))
    build(str(tmp_path / "m.onnx"), str(tmp_path / "m.wi"), target="software")
    x = np.array([-1.0, 0.5, 2.0], np.float32)
    (y,) = InferenceSession(str(tmp_path / "m.wi"), device="gpu").run(None, {"x": x})
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    with pytest.raises(WebinferError, match='device must be "gpu"'):
        InferenceSession(str(tmp_path / "m.wi"), device="tpu")
    with pytest.raises(WebinferError, match="feeds must be a dict"):
        InferenceSession(str(tmp_path / "m.wi")).run(None, [x])
