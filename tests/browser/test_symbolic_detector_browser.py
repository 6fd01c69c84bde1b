"""Real detectors with symbolic height and width in Chromium (Dawn/SwiftShader through Pyodide), from the zoo
cache: PP-OCRv4's text detector (rapidocr-onnxruntime) and a YOLOv8n (nudenet's 320n.onnx), each built once and
run at three image sizes in one page session, each equal to onnxruntime (relative error <= 1e-3 of the output's
scale; YOLOv8's boxes and class scores each at their own scale)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from detector_inputs import PPOCR_DET, YOLOV8_DET, packaged_model, photo, text_page
from smoke_site import build_smoke_site, run_smoke_page

from webinfer.build import build

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SIZES = [(64, 96), (96, 64), (32, 160)]


def _run_in_chromium(page, tmp_path, webinfer_wheel, spec, feeds: list) -> tuple[list, ort.InferenceSession]:
    """Build the packaged model once (symbolic H and W), run ``feeds`` in order in one page; the outputs."""
    model = packaged_model(spec, tmp_path)
    art = str(tmp_path / "det.wi")
    build(str(model), art, target="software")  # (SwiftShader's class: the page compiles only what it runs)
    site = build_smoke_site(art, str(tmp_path / "site"), feeds, wheel=webinfer_wheel)
    runs = run_smoke_page(page, site, timeout_ms=540_000)["runs"]
    assert len(runs) == len(feeds)
    outputs = [next(iter(run.values())) for run in runs]
    return outputs, ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])


def _rel(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max() / np.abs(want).max())


def test_ppocr_text_detector_three_sizes_in_chromium(page, tmp_path, webinfer_wheel):
    feeds = [{"x": text_page(h, w, seed=i)} for i, (h, w) in enumerate(SIZES)]
    outputs, reference = _run_in_chromium(page, tmp_path, webinfer_wheel, PPOCR_DET, feeds)
    errors = []
    for (h, w), feed, arr in zip(SIZES, feeds, outputs):
        want = reference.run(None, feed)[0]
        assert arr.shape == want.shape == (1, 1, h, w)
        assert _rel(arr, want) <= 1e-3, f"Chromium vs onnxruntime at {h}x{w}: relative error {_rel(arr, want):.1e}"
        errors.append(f"{h}x{w} {_rel(arr, want):.1e}")
    print(f"PP-OCRv4 det in Chromium, relative error vs onnxruntime: {', '.join(errors)}")


def test_yolov8_detector_three_sizes_in_chromium(page, tmp_path, webinfer_wheel):
    feeds = [{"images": photo(h, w, seed=i)} for i, (h, w) in enumerate(SIZES)]
    outputs, reference = _run_in_chromium(page, tmp_path, webinfer_wheel, YOLOV8_DET, feeds)
    errors = []
    for (h, w), feed, arr in zip(SIZES, feeds, outputs):
        want = reference.run(None, feed)[0]
        assert arr.shape == want.shape
        for part, rows in (("boxes", slice(0, 4)), ("scores", slice(4, None))):
            err = _rel(arr[:, rows], want[:, rows])
            assert err <= 1e-3, f"Chromium vs onnxruntime at {h}x{w}, {part}: relative error {err:.1e}"
            errors.append(f"{h}x{w} {part} {err:.1e}")
    print(f"YOLOv8n (nudenet 320n) in Chromium, relative error vs onnxruntime: {', '.join(errors)}")
