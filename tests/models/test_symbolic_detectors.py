"""Two real detector kinds whose height and width are symbolic, each built ONCE and run at three image sizes
against onnxruntime, as packages ship them (from the cache that scripts/setup.sh fills): PP-OCRv4's text detector
(rapidocr-onnxruntime 1.4.4) and a YOLOv8n detector exported by Ultralytics with ``dynamic=True`` (nudenet 3.4.2's
320n.onnx: anchors from Shape -> Gather -> Cast -> float Range, DFL, 18 classes).

Both used to fail to build (``dim expression nested too deeply``): five stride-2 convs nested five floor
divisions; dims.py now keeps them one, ``(H + 31) // 32``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from detector_inputs import PPOCR_DET, YOLOV8_DET, packaged_model, photo, text_page

from webinfer.build import build
from webinfer.errors import WebinferError
from webinfer.runtime.inference import InferenceSession

pytestmark = pytest.mark.slow

OCR_SIZES = [(64, 96), (96, 160), (160, 128)]  # PP-OCR's detector takes multiples of 32
YOLO_SIZES = [(64, 96), (96, 160), (160, 128)]


def built(model: Path, out: Path) -> tuple[InferenceSession, ort.InferenceSession]:
    build(str(model), str(out))  # no --dim: height and width stay symbolic
    return InferenceSession(str(out)), ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max() / np.abs(want).max())


@pytest.fixture(scope="module")
def ppocr(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ppocr")
    return built(packaged_model(PPOCR_DET, tmp), tmp / "artifact")


@pytest.fixture(scope="module")
def yolo(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("yolov8")
    return built(packaged_model(YOLOV8_DET, tmp), tmp / "artifact")


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
        assert got.shape == want.shape == (1, 4 + 18, anchors)
        # boxes (pixels, from the anchors computed from the shapes) and class scores, each at its own scale
        assert rel_err(got[:, :4], want[:, :4]) <= 1e-3, (h, w, "boxes", rel_err(got[:, :4], want[:, :4]))
        assert rel_err(got[:, 4:], want[:, 4:]) <= 1e-3, (h, w, "scores", rel_err(got[:, 4:], want[:, 4:]))
