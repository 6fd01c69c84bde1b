"""The detection and mask (argmax, matte) epilogues in Chromium (Dawn/SwiftShader through Pyodide: the one-workgroup bitonic
sort and greedy suppression use workgroupUniformLoad and storageBarrier, which Tint validates on its own):
the artifact's outputs for three image sizes in one page session equal native webinfer's."""

from __future__ import annotations

import numpy as np
import pytest
from smoke_site import build_smoke_site, run_smoke_page

from tests.graph.test_detect_epilogue import synthetic_head
from tests.graph.test_mask_epilogue import picture, segmentation_model
from webinfer.build import build
from webinfer.runtime.inference import InferenceSession

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SIZES = [(50, 90), (64, 64), (120, 40)]


def _feeds() -> list[dict]:
    return [{"image": picture(h, w, k).view(np.uint32)[..., 0]} for k, (h, w) in enumerate(SIZES)]


def test_detection_segmentation_and_background_removal_in_chromium_equal_native(page, tmp_path, webinfer_wheel):
    det, matte = str(tmp_path / "det.wi"), str(tmp_path / "matte.wi")
    build(synthetic_head(3, 2, True), det, target="software", preprocess={"resize": {"letterbox": [64, 64]}},
          postprocess={"head": "yolov8", "sigmoid": True, "score_threshold": 0.6, "iou_threshold": 0.3},
          task="object-detection")
    build(segmentation_model(1, True), matte, target="software", preprocess={"resize": {"letterbox": [48, 64]}},
          task="background-removal")
    seg = str(tmp_path / "seg.wi")
    build(segmentation_model(5, False), seg, target="software", preprocess={"resize": {"letterbox": [48, 64]}},
          task="image-segmentation")
    for art, names in ((det, ["detections", "detections_count"]), (matte, ["matte", "cutout"]), (seg, ["segments"])):
        feeds = _feeds()
        runs = run_smoke_page(page, build_smoke_site(art, str(tmp_path / f"site-{names[0]}"), feeds,
                                                     wheel=webinfer_wheel), timeout_ms=540_000)["runs"]
        native = InferenceSession(art)
        for (h, w), feed, run in zip(SIZES, feeds, runs):
            want = native.run(names, feed)
            for name, expected in zip(names, want):
                got = run[name]
                assert got.shape == expected.shape, (name, h, w)
                if name == "detections_count":
                    assert got[0] == expected[0] > 3, (h, w)
                elif name == "segments":
                    assert (got != expected).mean() < 1e-3 and len(np.unique(expected)) > 1, (h, w)
                elif name == "cutout":
                    a, b = got.view(np.uint8).reshape(h, w, 4), expected.view(np.uint8).reshape(h, w, 4)
                    assert (a[..., :3] == b[..., :3]).all() and np.abs(a[..., 3].astype(int) - b[..., 3]).max() <= 1
                else:
                    np.testing.assert_allclose(got, expected, atol=1e-3, err_msg=f"{name} at {h}x{w}")
