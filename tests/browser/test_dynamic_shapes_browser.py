"""One artifact with symbolic H and W in Chromium (Dawn/SwiftShader through Pyodide): the text-detection-style
model of tests/vision_models.py at five image sizes in one session, each equal to onnxruntime and to the
native run."""

from __future__ import annotations

import base64
import json

import numpy as np
import onnxruntime as ort
import pytest
from smoke_site import build_smoke_site
from vision_models import text_detection_model

import webinfer
from webinfer.build import build
from webinfer.serve import serve_in_thread

pytestmark = pytest.mark.browser
SIZES = [(37, 53), (64, 64), (31, 20), (9, 96), (1, 1)]
TOL = 1e-4


def test_text_detection_five_sizes_in_chromium(page, tmp_path, webinfer_wheel):
    model = text_detection_model()
    art = str(tmp_path / "det.wi")
    build(model, art)
    rng = np.random.default_rng(3)
    feeds = [{"x": rng.random((1, 3, h, w), dtype=np.float32)} for h, w in SIZES]
    reference = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    native = webinfer.InferenceSession(art)
    site = build_smoke_site(art, str(tmp_path / "site"), feeds, wheel=webinfer_wheel)
    server, url = serve_in_thread(site)
    console = []
    page.on("console", lambda m: console.append(f"[{m.type}] {m.text}"))
    try:
        page.goto(url + "index.html")
        page.wait_for_selector("#outputs[data-done]", state="attached", timeout=420_000)  # SwiftShader compiles each pipeline at first use
        el = page.locator("#outputs")
        assert el.get_attribute("data-error") is None, el.get_attribute("data-error") + "\n" + "\n".join(console[-30:])
        runs = json.loads(el.get_attribute("data-runs"))
        timings = json.loads(el.get_attribute("data-timings"))
    finally:
        server.shutdown()
        server.server_close()
    assert len(runs) == len(SIZES)
    diffs = []
    for (h, w), feed, run in zip(SIZES, feeds, runs):
        got = run["y"]
        arr = np.frombuffer(base64.b64decode(got["b64"]), dtype=got["dtype"]).reshape(got["shape"])
        want = reference.run(None, feed)[0]
        assert arr.shape == want.shape == (1, 1, h, w)
        np.testing.assert_allclose(arr, want, rtol=TOL, atol=TOL, err_msg=f"Chromium vs onnxruntime at {h}x{w}")
        np.testing.assert_allclose(arr, native.run(None, feed)[0], rtol=TOL, atol=TOL, err_msg=f"vs native at {h}x{w}")
        diffs.append(f"{h}x{w} {np.abs(arr - want).max():.1e}")
    print(f"text detection in Chromium, max abs diff vs onnxruntime: {', '.join(diffs)}; {timings}")
