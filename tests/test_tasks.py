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


def test_feature_extraction_pools_on_the_gpu_as_sentence_transformers(tmp_path):
    """Each pooling mode (and the L2 normalisation) of --sentence-embedding on a tiny embedding model, against
    numpy's pooling of onnxruntime's hidden states; a padded batch pools each row over its own mask."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from sentence_ref import pool

    from webinfer.llm.embeddings import Embedder
    from webinfer.runtime.inference import InferenceSession

    table = np.random.default_rng(3).standard_normal((30, 8)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["g"]),
         helper.make_node("Cast", ["attention_mask"], ["mf"], to=TensorProto.FLOAT),
         helper.make_node("Unsqueeze", ["mf", "axes"], ["m3"]), helper.make_node("Mul", ["g", "m3"], ["gm"]),
         helper.make_node("Tanh", ["gm"], ["last_hidden_state"])], "emb",
        [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"]) for n in ("input_ids",
                                                                                            "attention_mask")],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", 8])],
        [numpy_helper.from_array(table, "table"), numpy_helper.from_array(np.array([-1], np.int64), "axes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    ids = np.array([[2, 5, 7, 9, 4], [3, 8, 1, 0, 0]], np.int64)
    mask = (np.arange(5)[None] < np.array([[5], [3]])).astype(np.int64)
    hidden = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"input_ids": ids, "attention_mask": mask})[0]
    for mode in ("mean", "cls", "max", "mean_sqrt_len"):
        art = str(tmp_path / f"{mode}.wi")
        build(model, art, target="software", sentence_embedding=mode)
        sess = InferenceSession(art)  # (no tokenizer beside this model: the embedder takes token ids)
        got = np.array(Embedder(sess.run_async, sess.get_inputs(), tokenizer=None)([list(ids[0]), list(ids[1][:3])]))
        np.testing.assert_allclose(got, pool(hidden, mask, mode), rtol=1e-5, atol=1e-6, err_msg=mode)
    onnx.save(model, str(tmp_path / "m.onnx"))
    with pytest.raises(WebinferError, match="no sentence-transformers modules.json"):
        build(str(tmp_path / "m.onnx"), str(tmp_path / "auto.wi"), sentence_embedding="auto")
