"""The object-detection and background-removal pages (webinfer/site/pages/detect, removebg) in headless
Chromium: both listed in the site's index, all work in the worker, and their results on an image file equal
native webinfer's on the same pixels (the detections; the cut-out). Small synthetic models (tests/graph:
a YOLOv8-shaped head, a matting net) keep the page loads short; the epilogues' correctness against numpy and
onnxruntime is tests/graph/test_detect_epilogue.py's and test_mask_epilogue.py's."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from PIL import Image

from tests.graph.test_detect_epilogue import assert_same_detections, synthetic_head
from tests.graph.test_mask_epilogue import picture, segmentation_model
from webinfer.build import build
from webinfer.bundle import bundle
from webinfer.runtime.inference import InferenceSession
from webinfer.runtime.session import run_sync
from webinfer.runtime.vision_tasks import detect, segment, session_parts

pytestmark = [pytest.mark.browser, pytest.mark.slow]
TIMEOUT_MS = 420_000


def _page_bytes(page, expr: str) -> bytes:
    b64 = page.evaluate(f"""() => {{ const b = {expr}; let s = "";
        for (let i = 0; i < b.length; i += 8192) s += String.fromCharCode(...b.subarray(i, i + 8192));
        return btoa(s); }}""")
    return base64.b64decode(b64)


def _visit(page, url: str) -> dict:
    console = []
    page.on("console", lambda m: console.append(f"[{m.type}] {m.text}"))
    page.goto(url)
    page.wait_for_selector("#result[data-done]", state="attached", timeout=TIMEOUT_MS)
    el = page.locator("#result")
    assert el.get_attribute("data-error") is None, el.get_attribute("data-error") + "\n" + "\n".join(console[-20:])
    w, h = page.evaluate("() => [window.webinferDemo.width, window.webinferDemo.height]")
    rgba = np.frombuffer(_page_bytes(page, "window.webinferDemo.input"), np.uint8).reshape(h, w, 4)
    return {"rgba": rgba, "detections": el.get_attribute("data-detections")}


def test_detect_and_removebg_pages_equal_native(page, tmp_path, webinfer_wheel):
    import json

    from webinfer.serve import serve_in_thread

    det, matte, site = str(tmp_path / "det.wi"), str(tmp_path / "matte.wi"), tmp_path / "site"
    labels = tmp_path / "labels.txt"
    labels.write_text("cat\ndog\nowl\n")
    build(synthetic_head(3, 2, True), det, target="software", tiles="startup",
          preprocess={"resize": {"letterbox": [64, 64], "pad": 114}}, task="object-detection",
          postprocess={"head": "yolov8", "sigmoid": True, "score_threshold": 0.6, "iou_threshold": 0.3,
                       "labels": str(labels)})
    build(segmentation_model(1, True), matte, target="software", tiles="startup",
          preprocess={"resize": {"letterbox": [48, 64]}}, task="background-removal")
    image = tmp_path / "photo.png"
    Image.fromarray(picture(70, 100, 2)[..., :3]).save(image)  # opaque: the page decodes the same bytes
    bundle(det, str(site), demo="detect", files=[str(image)], wheel=webinfer_wheel)
    bundle(matte, str(site), demo="removebg", files=[str(image)], wheel=webinfer_wheel)
    server, url = serve_in_thread(str(site))
    try:
        page.goto(url)
        hrefs = page.locator("ul.demos a").evaluate_all("els => els.map(e => e.getAttribute('href'))")
        assert {"detect/", "removebg/"} <= set(hrefs)

        got = _visit(page, url + "detect/?image=photo.png")
        core, read_asset = session_parts(InferenceSession(det))
        native = run_sync(detect(core, got["rgba"].tobytes(), 100, 70, read_asset))
        shown = json.loads(got["detections"])
        assert len(native) > 3 and {d["label"] for d in native} <= {"cat", "dog", "owl"}
        assert_same_detections(shown, native, "detect page")

        got = _visit(page, url + "removebg/?image=photo.png")
        cutout = np.frombuffer(_page_bytes(page, "window.webinferDemo.cutout"), np.uint8).reshape(70, 100, 4)
        core, read_asset = session_parts(InferenceSession(matte))
        want = np.frombuffer(run_sync(segment(core, got["rgba"].tobytes(), 100, 70, read_asset))["cutout"],
                             np.uint8).reshape(70, 100, 4)
        assert (cutout[..., :3] == want[..., :3]).all()
        assert np.abs(cutout[..., 3].astype(int) - want[..., 3]).max() <= 1 and want[..., 3].std() > 5
    finally:
        server.shutdown()
        server.server_close()
