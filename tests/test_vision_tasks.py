"""One call per vision task: ``pipeline("object-detection" | "image-segmentation" | "background-removal", ART)``
on an image file, and the CLI (``webinfer build --task``, ``webinfer detect --json``, ``webinfer segment -o``),
checked against the numpy/onnxruntime references of tests/graph/test_detect_epilogue.py and
test_mask_epilogue.py."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from PIL import Image

from tests.graph.test_detect_epilogue import assert_same_detections, letterbox, reference, synthetic_head
from tests.graph.test_mask_epilogue import picture, resize_reference, segmentation_model
from webinfer.cli import main
from webinfer.errors import WebinferError
from webinfer.tasks import pipeline

PRE = {"resize": {"letterbox": [64, 64], "pad": 114}}
POST = {"head": "yolov8", "sigmoid": True, "score_threshold": 0.6, "iou_threshold": 0.3, "max_detections": 40}


def write(tmp_path, name: str, obj) -> str:
    path = tmp_path / name
    if isinstance(obj, onnx.ModelProto):
        onnx.save(obj, str(path))
    else:
        path.write_text(json.dumps(obj))
    return str(path)


def test_object_detection_pipeline_and_cli_equal_reference(tmp_path, capsys):
    model = synthetic_head(3, 2, True)
    labels = ["cat", "dog", "owl"]
    (tmp_path / "labels.txt").write_text("\n".join(labels) + "\n")
    art = str(tmp_path / "det.wi")
    assert main(["build", write(tmp_path, "det.onnx", model), "-o", art, "--preprocess", write(tmp_path, "pre.json", PRE),
                 "--task", "object-detection", "--postprocess",
                 write(tmp_path, "post.json", {**POST, "labels": "labels.txt"})]) == 0
    rgb = np.random.default_rng(3).integers(0, 256, (70, 45, 3), dtype=np.uint8)
    Image.fromarray(rgb).save(tmp_path / "x.png")
    planes, geometry = letterbox(rgb, [64, 64], 114.0, "center")
    raw = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": (planes / 255)[None].astype(np.float32)})[0]
    want = reference(raw, "yolov8", [64, 64], geometry, (70, 45), 0.6, 0.3, 40, sigmoid=True)
    for d in want:
        d["label"] = labels[int(d["label"])]

    got = pipeline("object-detection", art)(str(tmp_path / "x.png"))
    assert_same_detections(got, want, "pipeline")
    capsys.readouterr()
    assert main(["detect", art, str(tmp_path / "x.png"), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert_same_detections(printed, want, "webinfer detect --json")
    assert all(set(d) == {"label", "score", "box"} and len(d["box"]) == 4 for d in printed)


def test_background_removal_cli_writes_the_cutout(tmp_path, capsys):
    model = segmentation_model(1, True)
    pre = {"resize": {"letterbox": [48, 64], "pad": 0}}
    art = str(tmp_path / "matte.wi")
    assert main(["build", write(tmp_path, "m.onnx", model), "-o", art, "--preprocess", write(tmp_path, "p.json", pre),
                 "--task", "background-removal"]) == 0
    rgba = picture(40, 90, 0)
    Image.fromarray(rgba, "RGBA").save(tmp_path / "in.png")
    assert main(["segment", art, str(tmp_path / "in.png"), "-o", str(tmp_path / "cut.png")]) == 0
    assert "90x40 cut-out" in capsys.readouterr().out
    cut = np.asarray(Image.open(tmp_path / "cut.png"))
    planes, geometry = letterbox(rgba[..., :3], [48, 64], 0.0, "center")
    mask = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": (planes / 255)[None].astype(np.float32)})[0]
    alpha = np.round(np.clip(resize_reference(mask, geometry, (40, 90))[0], 0, 1) * rgba[..., 3])
    assert cut.shape == (40, 90, 4) and (cut[..., :3] == rgba[..., :3]).all()
    assert np.abs(cut[..., 3] - alpha).max() <= 1
    out = pipeline("background-removal", art)(str(tmp_path / "in.png"))
    assert out["matte"].shape == (40, 90) and bytes(out["cutout"]) == cut.tobytes()


def test_image_segmentation_cli_writes_the_class_map(tmp_path, capsys):
    model = segmentation_model(4, False)
    (tmp_path / "labels.txt").write_text("sky\nroad\ntree\ncar\n")
    art = str(tmp_path / "seg.wi")
    assert main(["build", write(tmp_path, "s.onnx", model), "-o", art, "--preprocess",
                 write(tmp_path, "p.json", {"resize": {"letterbox": [48, 64]}}), "--task", "image-segmentation",
                 "--postprocess", write(tmp_path, "q.json", {"labels": "labels.txt"})]) == 0
    Image.fromarray(picture(50, 30, 1), "RGBA").save(tmp_path / "in.png")
    assert main(["segment", art, str(tmp_path / "in.png"), "-o", str(tmp_path / "map.png")]) == 0
    printed = capsys.readouterr().out
    seg = np.asarray(Image.open(tmp_path / "map.png"))
    out = pipeline("image-segmentation", art)(str(tmp_path / "in.png"))
    assert (seg == out["segments"]).all() and out["labels"] == ["sky", "road", "tree", "car"]
    assert all(name in printed for name in (out["labels"][c] for c in np.unique(seg)))


def test_vision_task_errors_are_one_line(tmp_path, capsys):
    model = segmentation_model(1, True)
    art = str(tmp_path / "m.wi")
    assert main(["build", write(tmp_path, "m.onnx", model), "-o", art, "--preprocess",
                 write(tmp_path, "p.json", {"resize": {"letterbox": [48, 64]}}), "--task", "background-removal"]) == 0
    Image.fromarray(picture(20, 20, 0), "RGBA").save(tmp_path / "in.png")
    capsys.readouterr()
    assert main(["detect", art, str(tmp_path / "in.png")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("webinfer: error: this artifact has no detect epilogue") and err.count("\n") == 1
    assert main(["segment", art, str(tmp_path / "missing.png"), "-o", str(tmp_path / "o.png")]) == 2
    assert "missing.png: no such file" in capsys.readouterr().err
    with pytest.raises(WebinferError, match="--task 'speech'"):
        from webinfer.build import build

        build(model, str(tmp_path / "z.wi"), task="speech")
