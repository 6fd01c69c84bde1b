"""A real detector with symbolic height and width in Chromium (Dawn/SwiftShader through Pyodide): PP-OCRv4's
text detector from the rapidocr-onnxruntime wheel (the zoo cache), built once, at three page sizes in one
session, each equal to onnxruntime (relative error <= 1e-3 of the output's scale)."""

from __future__ import annotations

import base64
import json

import numpy as np
import onnxruntime as ort
import pytest
from detector_inputs import PPOCR_DET, packaged_model, text_page
from smoke_site import build_smoke_site

from webinfer.build import build
from webinfer.serve import serve_in_thread

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SIZES = [(64, 96), (96, 64), (32, 160)]


def test_ppocr_text_detector_three_sizes_in_chromium(page, tmp_path, webinfer_wheel):
    model = packaged_model(PPOCR_DET, tmp_path)
    art = str(tmp_path / "det.wi")
    build(str(model), art, target="software")  # (SwiftShader's class: the page compiles only what it runs)
    feeds = [{"x": text_page(h, w, seed=i)} for i, (h, w) in enumerate(SIZES)]
    reference = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    site = build_smoke_site(art, str(tmp_path / "site"), feeds, wheel=webinfer_wheel)
    server, url = serve_in_thread(site)
    console = []
    page.on("console", lambda m: console.append(f"[{m.type}] {m.text}"))
    try:
        page.goto(url + "index.html")
        page.wait_for_selector("#outputs[data-done]", state="attached", timeout=540_000)
        el = page.locator("#outputs")
        assert el.get_attribute("data-error") is None, el.get_attribute("data-error") + "\n" + "\n".join(console[-30:])
        runs = json.loads(el.get_attribute("data-runs"))
    finally:
        server.shutdown()
        server.server_close()
    assert len(runs) == len(SIZES)
    errors = []
    for (h, w), feed, run in zip(SIZES, feeds, runs):
        (got,) = run.values()
        arr = np.frombuffer(base64.b64decode(got["b64"]), dtype=got["dtype"]).reshape(got["shape"])
        want = reference.run(None, feed)[0]
        assert arr.shape == want.shape == (1, 1, h, w)
        err = float(np.abs(arr - want).max() / np.abs(want).max())
        assert err <= 1e-3, f"Chromium vs onnxruntime at {h}x{w}: relative error {err:.1e}"
        errors.append(f"{h}x{w} {err:.1e}")
    print(f"PP-OCRv4 det in Chromium, relative error vs onnxruntime: {', '.join(errors)}")
