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
