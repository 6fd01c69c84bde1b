"""``webinfer.tasks.pipeline``: one call per task, checked against onnxruntime over the same model."""

import numpy as np
import onnxruntime as ort
import pytest
from PIL import Image

from tests.graph.test_prepost import MEAN, STD, classifier_model, image, preprocess_reference
from webinfer.build import build
from webinfer.errors import WebinferError
from webinfer.tasks import pipeline


def test_unknown_task_is_one_line():
    with pytest.raises(WebinferError, match="unknown task 'speech'; the tasks are: .*image-classification"):
        pipeline("speech", "nowhere.wi")


def test_image_classification_from_a_file_equals_onnxruntime(tmp_path):
    model = classifier_model()
    labels = ["a", "b", "c", "d", "e", "f"]
    (tmp_path / "labels.txt").write_text("\n".join(labels) + "\n")
    post = tmp_path / "classify.json"
    post.write_text('{"softmax": true, "top_k": 2, "labels": "labels.txt"}')
    pre = {"resize": {"shorter": 18}, "crop": [16, 16], "mean": MEAN, "std": STD}
    art = str(tmp_path / "cls.wi")
    build(model, art, preprocess=pre, postprocess=str(post))
    rgba = image(30, 21)
    Image.fromarray(rgba).save(tmp_path / "x.png")
    logits = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": preprocess_reference(rgba, pre)})[0][0].astype(np.float64)
    got = pipeline("image-classification", art)(str(tmp_path / "x.png"))
    assert [label for label, _ in got] == [labels[i] for i in np.argsort(-logits)[:2]]
    with pytest.raises(WebinferError, match="no such file"):
        pipeline("image-classification", art)(str(tmp_path / "missing.png"))
