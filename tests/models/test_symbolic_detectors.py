"""Two real detector kinds whose height and width are symbolic, each built ONCE and run at three image sizes
against onnxruntime: PP-OCRv4's text detector as the rapidocr-onnxruntime wheel ships it (from the cache that
scripts/setup.sh fills), and a YOLOv8n-shaped detector exported as ``yolo export dynamic=True`` writes it
(tests/models/yolov8_net.py: no package ships a YOLOv8 ONNX with symbolic H and W).

Both used to fail to build (``dim expression nested too deeply``): five stride-2 convs nested five floor
divisions; dims.py now keeps them one, ``(H + 31) // 32``.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from webinfer.build import build
from webinfer.errors import WebinferError
from webinfer.runtime.inference import InferenceSession

pytestmark = pytest.mark.slow

RAPIDOCR_WHEEL = "rapidocr_onnxruntime-1.4.4-py3-none-any.whl"
RAPIDOCR_SHA256 = "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf"
DET_MEMBER = "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx"
OCR_SIZES = [(64, 96), (96, 160), (160, 128)]  # PP-OCR's detector takes multiples of 32
YOLO_SIZES = [(64, 96), (96, 160), (160, 128)]


def zoo_cache() -> Path:
    return Path(os.environ.get("WEBINFER_CACHE", Path.home() / ".cache" / "webinfer")) / "zoo"


def ppocr_det_path(tmp: Path) -> Path:
    """The detector from the cached wheel (zoo layout: archives/<wheel>, or the pip download folder)."""
    zoo = zoo_cache()
    extracted = zoo / "models" / "ppocrv4-det.onnx"
    wheel = next((p for p in (zoo / "archives" / RAPIDOCR_WHEEL, zoo / "rapidocr-onnxruntime-1.4.4" / RAPIDOCR_WHEEL)
                  if p.is_file()), None)
    if wheel is None:
        if extracted.is_file():
            return extracted
        pytest.skip(f"{RAPIDOCR_WHEEL} is not in {zoo} (scripts/setup.sh fetches it: fetch_symbolic_detectors)")
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() == RAPIDOCR_SHA256, f"{wheel} changed"
    out = tmp / "ch_PP-OCRv4_det_infer.onnx"
    with zipfile.ZipFile(wheel) as z:
        out.write_bytes(z.read(DET_MEMBER))
    return out


def text_page(h: int, w: int, seed: int = 0) -> np.ndarray:
    """Dark text lines rendered on a light page, normalised as RapidOCR feeds its detector: [1, 3, h, w]."""
    from PIL import Image, ImageDraw, ImageFont

    rng = np.random.default_rng(seed)
    img = Image.new("RGB", (w, h), (235, 232, 225))
    draw = ImageDraw.Draw(img)
    words = ["webinfer", "OCR", "detector", "2026", "symbolic", "dims", "hello", "world"]
    y = 4
    while y < h - 12:
        draw.text((4 + int(rng.integers(0, 12)), y), " ".join(rng.choice(words, 3)), fill=(20, 20, 30),
                  font=ImageFont.load_default())
        y += 14 + int(rng.integers(0, 8))
    a = (np.asarray(img, np.float32) / 255.0 - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]
    return a.transpose(2, 0, 1)[None].astype(np.float32)


def photo(h: int, w: int, seed: int = 0) -> np.ndarray:
    """A synthetic photo: a sky-to-ground gradient and a few filled shapes, RGB in [0, 1]: [1, 3, h, w]."""
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    yy = np.linspace(0, 1, h, dtype=np.float32)[:, None, None]
    base = np.concatenate([0.4 + 0.3 * yy, 0.6 - 0.2 * yy, 0.9 - 0.5 * yy], -1) * np.ones((1, w, 1), np.float32)
    img = Image.fromarray((base * 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    for _ in range(6):
        x0, y0 = int(rng.integers(0, w - 8)), int(rng.integers(0, h - 8))
        box = (x0, y0, x0 + int(rng.integers(6, w // 3)), y0 + int(rng.integers(6, h // 3)))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)(box, fill=tuple(int(c) for c in rng.integers(0, 255, 3)))
    return (np.asarray(img, np.float32) / 255.0).transpose(2, 0, 1)[None].copy()


def built(model: Path, out: Path) -> tuple[InferenceSession, ort.InferenceSession]:
    build(str(model), str(out))  # no --dim: height and width stay symbolic
    return InferenceSession(str(out)), ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max() / np.abs(want).max())


@pytest.fixture(scope="module")
def ppocr(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ppocr")
    return built(ppocr_det_path(tmp), tmp / "artifact")


@pytest.fixture(scope="module")
def yolo(tmp_path_factory):
    from yolov8_net import export_yolov8

    tmp = tmp_path_factory.mktemp("yolov8")
    return built(export_yolov8(tmp / "yolov8n-dynamic.onnx"), tmp / "artifact")


def test_ppocr_text_detector_one_build_three_sizes(ppocr):
    ours, ref = ppocr
    assert {"p2o.DynamicDimension.1", "p2o.DynamicDimension.2"} <= set(ours.artifact.manifest["dims"])
    for h, w in OCR_SIZES:
        x = text_page(h, w)
        (got,), (want,) = ours.run(None, {"x": x}), ref.run(None, {"x": x})
        assert got.shape == want.shape == (1, 1, h, w)
        assert (want > 0.3).mean() > 0.05, "the rendered text is detected (a real input, not noise)"
        assert rel_err(got, want) <= 1e-3, (h, w, rel_err(got, want))


def test_ppocr_size_that_the_network_cannot_take_is_one_line(ppocr):
    # 80 is not a multiple of 32: the FPN's upsampled and skip maps differ (onnxruntime fails in its Add too)
    ours, ref = ppocr
    with pytest.raises(WebinferError, match="broadcasting needs"):
        ours.run(None, {"x": text_page(80, 96)})


def test_yolov8_detector_one_build_three_sizes(yolo):
    ours, ref = yolo
    for h, w in YOLO_SIZES:
        x = photo(h, w)
        (got,), (want,) = ours.run(None, {"images": x}), ref.run(None, {"images": x})
        anchors = (h // 8) * (w // 8) + (h // 16) * (w // 16) + (h // 32) * (w // 32)
        assert got.shape == want.shape == (1, 84, anchors)
        # boxes (pixels, from the anchors computed from the shapes) and class scores, each at its own scale
        assert rel_err(got[:, :4], want[:, :4]) <= 1e-3, (h, w, "boxes", rel_err(got[:, :4], want[:, :4]))
        assert rel_err(got[:, 4:], want[:, 4:]) <= 1e-3, (h, w, "scores", rel_err(got[:, 4:], want[:, 4:]))
