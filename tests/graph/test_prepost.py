"""Pre-processing prologue (RGBA8 pixels of any size -> the model's input, on the GPU) against a PIL/numpy
reference, and the classification epilogue (softmax, top-k, labels) against numpy on onnxruntime's scores."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from vision_models import preprocess_reference

from webinfer.build import build
from webinfer.errors import WebinferError
from webinfer.runtime.inference import InferenceSession

rng = np.random.default_rng(0)


def identity_model(shape) -> onnx.ModelProto:
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "id",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


def image(h: int, w: int) -> np.ndarray:
    return rng.integers(0, 256, (h, w, 4), dtype=np.uint8)


MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
SPECS = {
    "shorter_crop_bilinear_bgr": ({"resize": {"shorter": 24}, "crop": [20, 22], "channels": "BGR", "mean": MEAN,
                                   "std": STD}, [1, 3, 20, 22]),
    "size_bicubic_nhwc": ({"resize": {"size": [17, 26]}, "interpolation": "bicubic", "layout": "NHWC",
                           "scale": 1.0, "mean": 127.5, "std": 127.5}, [1, 17, 26, 3]),
    "shorter_nearest_symbolic": ({"resize": {"shorter": 15}, "interpolation": "nearest"}, [1, 3, "h", "w"]),
}
SIZES = [(37, 53), (12, 9), (64, 30)]  # shrink and enlarge, odd, non-square


@pytest.mark.parametrize("case", list(SPECS))
def test_prologue_matches_pil_preprocess_reference(case, tmp_path):
    spec, shape = SPECS[case]
    art = str(tmp_path / "pre.wi")
    manifest = build(identity_model(shape), art, preprocess=spec)
    assert [io["name"] for io in manifest["inputs"]] == ["image"]
    assert manifest["tensors"][manifest["inputs"][0]["tensor"]]["dtype"] == "uint32"
    labels = {s["label"] for p in manifest["programs"] for s in p["steps"]}
    assert "resize:FusedImageResize" in labels and not any(la.startswith("elementwise") for la in labels)  # normalised in the resize's store
    session = InferenceSession(art)
    for h, w in SIZES:
        rgba = image(h, w)
        got = session.run(None, {"image": rgba})[0]  # uint8 pixels, packed 4 per u32 as they are
        want = preprocess_reference(rgba, spec)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-4, err_msg=f"{case} at {h}x{w}")


def classifier_model(classes: int = 6) -> onnx.ModelProto:
    """Conv -> GlobalAveragePool -> Flatten -> Gemm: scores [1, classes] for a [1, 3, 16, 16] image."""
    inits = {"w": rng.standard_normal((8, 3, 3, 3)).astype(np.float32),
             "g": rng.standard_normal((classes, 8)).astype(np.float32), "b": rng.standard_normal(classes).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "g", "b"], ["logits"], transB=1)]
    g = helper.make_graph(nodes, "cls", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, classes])],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


def test_classifier_epilogue_gives_labels_and_scores(tmp_path):
    model = classifier_model()
    labels = ["cat", "dog", "fox", "owl", "été", "yak"]
    (tmp_path / "labels.txt").write_text("\n".join(labels) + "\n", encoding="utf-8")
    pre = {"resize": {"shorter": 18}, "crop": [16, 16], "mean": MEAN, "std": STD}
    post = tmp_path / "classify.json"
    post.write_text('{"softmax": true, "top_k": 3, "labels": "labels.txt"}')
    art = str(tmp_path / "cls.wi")
    manifest = build(model, art, preprocess=pre, postprocess=str(post))
    assert manifest["classify"]["top_k"] == 3
    session = InferenceSession(art)
    reference_session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for h, w in [(40, 23), (16, 16)]:
        rgba = image(h, w)
        logits = reference_session.run(None, {"x": preprocess_reference(rgba, pre)})[0][0].astype(np.float64)
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        best = np.argsort(-probs)[:3]
        got = session.classify(rgba)
        assert [label for label, _ in got] == [labels[i] for i in best]
        np.testing.assert_allclose([s for _, s in got], probs[best], rtol=1e-4, atol=1e-6)
        # raw bytes with their size, as a page passes them, give the same answer
        assert session.classify(rgba.tobytes(), width=w, height=h) == got
    logits_out = session.run(["logits"], {"image": image(20, 20)})[0]
    assert logits_out.shape == (1, 6)


@pytest.mark.parametrize("spec,message", [
    ({"resize": {"shorter": 8}, "crop": [16, 16]}, "larger than the resized image"),
    ({"crop": [16, 16], "colour": "RGB"}, "unknown key 'colour'"),
    ({"crop": [16, 16], "channels": "RGBA"}, "has 3 channels"),
    ({"crop": [16, 16], "input": "nope"}, "no input 'nope'"),
    ({"resize": {"size": [20, 20]}}, "the prologue gives [1, 3, 20, 20]"),
    ({"crop": [16, 16], "interpolation": "lanczos"}, "interpolation 'lanczos'"),
])
def test_bad_preprocess_specs_are_clear_errors(spec, message, tmp_path):
    with pytest.raises(WebinferError, match=None) as e:
        build(classifier_model(), str(tmp_path / "bad.wi"), preprocess=spec)
    assert message in str(e.value)


def test_bad_postprocess_specs_and_images(tmp_path):
    (tmp_path / "two.txt").write_text("a\nb\n")
    for spec, message in [({"labels": str(tmp_path / "two.txt")}, "has 2 labels"), ({"top_k": 9}, "top_k"),
                          ({"output": "nope"}, "no output 'nope'")]:
        with pytest.raises(WebinferError) as e:
            build(classifier_model(), str(tmp_path / "bad.wi"), postprocess=spec)
        assert message in str(e.value)
    art = str(tmp_path / "ok.wi")
    build(classifier_model(), art, preprocess={"crop": [16, 16]}, postprocess={})
    session = InferenceSession(art)
    assert [label for label, _ in session.classify(image(20, 16))][:1][0] in [str(i) for i in range(6)]
    with pytest.raises(WebinferError, match="must be at least the crop's 16"):
        session.classify(image(15, 40))
    with pytest.raises(WebinferError, match="are not 4x4 RGBA8 pixels"):
        session.classify(b"\0" * 10, width=4, height=4)
