"""Inputs for the symbolic-size detector tests (tests/models, tests/browser): two packaged detectors from the zoo
cache (scripts/setup.sh fetches their wheels), a rendered text page and a synthetic photo."""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

# Packaged detectors with symbolic height and width: (zoo id, package, version, wheel, sha256, member).
PPOCR_DET = ("ppocrv4-det", "rapidocr-onnxruntime", "1.4.4", "rapidocr_onnxruntime-1.4.4-py3-none-any.whl",
             "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf",
             "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx")  # PP-OCRv4 det, Apache-2.0
YOLOV8_DET = ("nudenet-320n", "nudenet", "3.4.2", "nudenet-3.4.2-py3-none-any.whl",
              "5937dbd84e5d8e5de038f08ffea5a1bb50a08475776bf2b4795914ce0eaf0331",
              "nudenet/320n.onnx")  # Ultralytics 8.2.46 YOLOv8n export, dynamic=True (package MIT, model AGPL-3.0)


def zoo_cache() -> Path:
    return Path(os.environ.get("WEBINFER_CACHE", Path.home() / ".cache" / "webinfer")) / "zoo"


def packaged_model(spec: tuple, tmp: Path) -> Path:
    """The model file from its cached wheel (the zoo's layout: archives/<wheel>, sha256 checked; or the model the
    zoo's fetch script extracted to models/<id>.onnx)."""
    zoo_id, package, version, wheel_name, sha, member = spec
    zoo = zoo_cache()
    wheel = next((p for p in (zoo / "archives" / wheel_name, zoo / f"{package}-{version}" / wheel_name) if p.is_file()),
                 None)
    if wheel is None:
        if (zoo / "models" / f"{zoo_id}.onnx").is_file():
            return zoo / "models" / f"{zoo_id}.onnx"
        pytest.fail(f"{wheel_name} is not in {zoo}/archives: scripts/setup.sh fetches it (scripts/fetch_zoo.py)")
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() == sha, f"{wheel} is not the pinned {package} {version}"
    out = tmp / f"{zoo_id}.onnx"
    with zipfile.ZipFile(wheel) as z:
        out.write_bytes(z.read(member))
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
