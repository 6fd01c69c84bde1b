"""The detection epilogue (``--task object-detection``: letterbox prologue, decode, threshold, class-aware NMS,
boxes in the image's pixels, all on the GPU) against a numpy reference of the same post-processing written
here over onnxruntime's raw head: same classes, IoU >= 0.99 per box, at three image sizes. Real detectors from
the zoo cache (scripts/fetch_zoo.py): nudenet 320n (YOLOv8 head, symbolic H/W) and ddddocr's detector (YOLOX
grid)."""

from __future__ import annotations

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from PIL import Image

from webinfer.build import build
from webinfer.errors import WebinferError
from webinfer.runtime.inference import InferenceSession
from webinfer.runtime.session import run_sync
from webinfer.runtime.vision_tasks import detect, session_parts

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from benchmarks.zoo.inputs import draw  # noqa: E402
from benchmarks.zoo.worker import default_cache  # noqa: E402


def zoo_model(model_id: str) -> str:
    path = default_cache() / "models" / f"{model_id}.onnx"
    assert path.is_file(), f"{path} is missing: run scripts/fetch_zoo.py (scripts/setup.sh does)"
    return str(path)


# -- the reference, written independently of webinfer -------------------------------------------------------
def letterbox(rgb: np.ndarray, size, pad: float, align: str):
    """PIL's float bilinear resize per channel into [H, W] keeping the aspect (each side rounded half up),
    centred or top-left, the rest ``pad``. Returns the planes [3, H, W] (0..255) and (rh, rw, top, left)."""
    h, w = rgb.shape[:2]
    H, W = size
    scale = min(H / h, W / w)
    rh, rw = min(H, int(np.floor(h * scale + 0.5))), min(W, int(np.floor(w * scale + 0.5)))
    top, left = ((H - rh) // 2, (W - rw) // 2) if align == "center" else (0, 0)
    planes = np.full((3, H, W), pad, np.float32)
    for c in range(3):
        plane = Image.fromarray(rgb[..., c].astype(np.float32), mode="F").resize((rw, rh), Image.BILINEAR)
        planes[c, top:top + rh, left:left + rw] = np.asarray(plane)
    return planes, (rh, rw, top, left)


def decode(raw: np.ndarray, head: str, size, strides=(8, 16, 32), sigmoid: bool = False):
    """Boxes (x0, y0, x1, y1) in the model input's pixels, best class score (times objectness) and class."""
    squash = (lambda v: 1 / (1 + np.exp(-v))) if sigmoid else (lambda v: v)
    if head == "yolov8":
        a = raw[0].T.astype(np.float64)  # [N, 4 + C]
        scores = squash(a[:, 4:])
    else:
        a = raw[0].astype(np.float64)  # [N, 5 + C]
        scores = squash(a[:, 5:]) * squash(a[:, 4:5])
    xy, wh = a[:, :2].copy(), a[:, 2:4].copy()
    if head == "yolox":
        grids, mult = [], []
        for s in strides:
            gh, gw = -(-size[0] // s), -(-size[1] // s)
            yy, xx = np.mgrid[0:gh, 0:gw]
            grids.append(np.stack([xx.ravel(), yy.ravel()], 1))
            mult.append(np.full(gh * gw, s))
        grid, stride = np.concatenate(grids), np.concatenate(mult)[:, None]
        xy, wh = (xy + grid) * stride, np.exp(wh) * stride
    boxes = np.concatenate([xy - wh / 2, xy + wh / 2], 1)
    return boxes, scores.max(1), scores.argmax(1)


def iou(p: np.ndarray, q: np.ndarray) -> float:
    iw, ih = min(p[2], q[2]) - max(p[0], q[0]), min(p[3], q[3]) - max(p[1], q[1])
    if iw <= 0 or ih <= 0:
        return 0.0
    inter = iw * ih
    return inter / ((p[2] - p[0]) * (p[3] - p[1]) + (q[2] - q[0]) * (q[3] - q[1]) - inter)


def reference(raw, head, size, geometry, image_hw, score_thr, iou_thr, max_det, sigmoid=False):
    boxes, scores, classes = decode(raw, head, size, sigmoid=sigmoid)
    keep = np.nonzero(scores > score_thr)[0]
    order = keep[np.lexsort((keep, -scores[keep]))]  # best first, ties: earlier anchor
    kept = []
    for i in order:
        if len(kept) == max_det:
            break
        if all(classes[j] != classes[i] or iou(boxes[i], boxes[j]) <= iou_thr for j in kept):
            kept.append(i)
    rh, rw, top, left = geometry
    h, w = image_hw
    out = []
    for i in kept:
        b = boxes[i]
        box = [np.clip((b[0] - left) * w / rw, 0, w), np.clip((b[1] - top) * h / rh, 0, h),
               np.clip((b[2] - left) * w / rw, 0, w), np.clip((b[3] - top) * h / rh, 0, h)]
        out.append({"label": str(classes[i]), "score": scores[i], "box": box})
    return out


def match(p, q) -> float:
    """IoU; a box clipped flat at the image's edge (no area) matches an equal one (within 0.01 pixel)."""
    p, q = np.array(p, np.float64), np.array(q, np.float64)
    if min(p[2] - p[0], p[3] - p[1], q[2] - q[0], q[3] - q[1]) <= 0:
        return 1.0 if np.abs(p - q).max() <= 0.01 else 0.0
    return iou(p, q)


def assert_same_detections(got: list, want: list, what: str) -> None:
    assert len(want) > 0, f"{what}: the reference finds nothing to compare"
    assert len(got) == len(want), f"{what}: {len(got)} boxes, the reference {len(want)}"
    free = list(range(len(got)))
    for d in want:
        same = [k for k in free if got[k]["label"] == d["label"]]
        assert same, f"{what}: no box of class {d['label']} left for {d}"
        k = max(same, key=lambda k: match(got[k]["box"], d["box"]))
        assert match(got[k]["box"], d["box"]) >= 0.99, (what, got[k], d)
        assert abs(got[k]["score"] - d["score"]) < 2e-3, (what, got[k], d)
        free.remove(k)


def synthetic_head(classes: int, stride: int, anchors_last: bool, seed: int = 0) -> onnx.ModelProto:
    """A detector-shaped net with random weights: Conv (k = stride = ``stride``) -> one anchor per cell; boxes
    sigmoid-scaled into a 64x64 input (centres anywhere, sizes up to 24), class (and objectness) logits raw.
    Output [1, 4 + C, N] (anchors last, YOLOv8) or [1, N, 5 + C] (YOLOv5)."""
    rng = np.random.default_rng(seed)
    attrs = 4 + classes + (0 if anchors_last else 1)
    N = helper.make_node
    inits = {"w": (rng.standard_normal((attrs, 3, stride, stride)) * 2 / stride).astype(np.float32),
             "b": rng.standard_normal(attrs).astype(np.float32) * 0.5, "shape": np.array([1, attrs, -1], np.int64),
             "s": np.array([64, 64, 24, 24], np.float32).reshape(1, 4, 1), "i0": np.array([0], np.int64),
             "i4": np.array([4], np.int64), "big": np.array([attrs], np.int64), "ax": np.array([1], np.int64)}
    nodes = [N("Conv", ["x", "w", "b"], ["c"], strides=[stride, stride]), N("Reshape", ["c", "shape"], ["r"]),
             N("Slice", ["r", "i0", "i4", "ax"], ["xywh"]), N("Sigmoid", ["xywh"], ["sq"]), N("Mul", ["sq", "s"], ["box"]),
             N("Slice", ["r", "i4", "big", "ax"], ["logits"]),
             N("Concat", ["box", "logits"], ["head" if anchors_last else "ht"], axis=1)]
    if not anchors_last:
        nodes.append(N("Transpose", ["ht"], ["head"], perm=[0, 2, 1]))
    g = helper.make_graph(nodes, "det", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])],
                          [helper.make_tensor_value_info("head", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


SYNTHETIC = {  # head, stride, post-processing: many candidates (N = 1024 and 256), overlapping boxes
    "yolov8-sigmoid": (True, 2, {"head": "yolov8", "sigmoid": True, "score_threshold": 0.6, "iou_threshold": 0.3,
                                 "max_detections": 40}),
    "yolov5-sigmoid": (False, 4, {"head": "yolov5", "sigmoid": True, "score_threshold": 0.05, "iou_threshold": 0.5}),
}


@pytest.mark.parametrize("case", list(SYNTHETIC))
def test_synthetic_heads_equal_numpy_reference(case, tmp_path):
    anchors_last, stride, post = SYNTHETIC[case]
    model = synthetic_head(3, stride, anchors_last)
    pre = {"resize": {"letterbox": [64, 64], "pad": 114}}
    art = str(tmp_path / "det.wi")
    build(model, art, preprocess=pre, postprocess=post, task="object-detection")
    core, read_asset = session_parts(InferenceSession(art))
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    for h, w in [(50, 90), (64, 64), (120, 40)]:
        rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        planes, geometry = letterbox(rgb, [64, 64], 114.0, "center")
        raw = ref.run(None, {"x": (planes / 255)[None].astype(np.float32)})[0]
        want = reference(raw, post["head"], [64, 64], geometry, (h, w), post["score_threshold"],
                         post["iou_threshold"], post.get("max_detections", 100), sigmoid=True)
        assert len(want) > 2
        rgba = np.concatenate([rgb, np.full((h, w, 1), 255, np.uint8)], -1)
        got = run_sync(detect(core, rgba.tobytes(), w, h, read_asset))
        assert_same_detections(got, want, f"{case} at {h}x{w}")


def test_detection_spec_errors(tmp_path):
    model = synthetic_head(3, 4, True)
    pre = {"resize": {"letterbox": [64, 64]}}
    bad = [({"head": "yolov9"}, pre, "head 'yolov9'"), ({"iou_threshold": 2}, pre, "iou_threshold must be"),
           ({"max_detections": 0}, pre, "max_detections must be"), ({"strides": [8, 16]}, pre, "strides .* give"),
           ({"colour": 1}, pre, "unknown key 'colour'"),
           ({}, {"resize": {"shorter": 64}, "crop": [64, 64]}, "not a centre crop")]
    for post, prologue, message in bad:
        with pytest.raises(WebinferError, match=message):
            build(model, str(tmp_path / "x.wi"), preprocess=prologue, postprocess=post, task="object-detection")
    (tmp_path / "labels.txt").write_text("a\nb\n")
    with pytest.raises(WebinferError, match="the labels name 2 classes, the head scores 3"):
        build(model, str(tmp_path / "y.wi"), preprocess=pre, task="object-detection",
              postprocess={"labels": str(tmp_path / "labels.txt")})


def photo(h: int, w: int) -> np.ndarray:
    """Grace Hopper's portrait (matplotlib's sample data) resized to h x w: nudenet finds her face."""
    import matplotlib

    path = os.path.join(os.path.dirname(matplotlib.__file__), "mpl-data", "sample_data", "grace_hopper.jpg")
    return np.asarray(Image.open(path).convert("RGB").resize((w, h), Image.BILINEAR))


CASES = {  # model, prologue, epilogue, head, image maker
    "nudenet-320n": ({"resize": {"letterbox": [320, 320], "pad": 114}},
                     {"head": "yolov8", "score_threshold": 0.02, "iou_threshold": 0.45, "max_detections": 50},
                     photo, [(600, 512), (333, 517), (200, 160)]),
    "ddddocr-det": ({"resize": {"letterbox": [416, 416], "pad": 114, "align": "top-left"}, "channels": "BGR",
                     "scale": 1.0},
                    {"head": "yolox", "score_threshold": 0.1, "iou_threshold": 0.45},
                    lambda h, w: draw("captcha", h, w, 0).astype(np.uint8), [(80, 240), (416, 416), (150, 300)]),
}


@pytest.mark.slow
@pytest.mark.parametrize("model_id", list(CASES))
def test_detection_epilogue_equals_numpy_reference_over_onnxruntime(model_id, tmp_path):
    pre, post, make, sizes = CASES[model_id]
    path = zoo_model(model_id)
    art = str(tmp_path / "det.wi")
    manifest = build(path, art, preprocess=pre, postprocess=post, task="object-detection")
    assert manifest["detect"]["max_detections"] == post.get("max_detections", 100)
    session = InferenceSession(art)
    core, read_asset = session_parts(session)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    size = pre["resize"]["letterbox"]
    for h, w in sizes:
        rgb = make(h, w)
        planes, geometry = letterbox(rgb, size, 114.0, pre["resize"].get("align", "center"))
        x = planes[::-1] if pre.get("channels") == "BGR" else planes
        x = (x * pre.get("scale", 1 / 255))[None].astype(np.float32)
        raw = ref.run(None, {ref.get_inputs()[0].name: x})[0]
        want = reference(raw, post["head"], size, geometry, (h, w), post["score_threshold"], post["iou_threshold"],
                         post.get("max_detections", 100))
        rgba = np.concatenate([rgb, np.full((h, w, 1), 255, np.uint8)], -1)
        got = run_sync(detect(core, rgba.tobytes(), w, h, read_asset))
        assert_same_detections(got, want, f"{model_id} at {h}x{w}")


def test_stretch_resize_and_no_prologue(tmp_path):
    """A plain resize to the input's size maps boxes back per axis; without a prologue the boxes stay in the
    model input's pixels (and a symbolic anchor count is refused in one line)."""
    model = synthetic_head(3, 4, True)
    post = {"head": "yolov8", "sigmoid": True, "score_threshold": 0.5, "iou_threshold": 0.4}
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    art = str(tmp_path / "stretch.wi")
    build(model, art, preprocess={"resize": {"size": [64, 64]}}, postprocess=post, task="object-detection")
    core, read_asset = session_parts(InferenceSession(art))
    rgb = np.random.default_rng(5).integers(0, 256, (40, 100, 3), dtype=np.uint8)
    planes = np.stack([np.asarray(Image.fromarray(rgb[..., c].astype(np.float32), mode="F").resize((64, 64),
                                                                                                   Image.BILINEAR))
                       for c in range(3)])
    x = (planes / 255)[None].astype(np.float32)
    raw = ref.run(None, {"x": x})[0]
    want = reference(raw, "yolov8", [64, 64], (64, 64, 0, 0), (40, 100), 0.5, 0.4, 100, sigmoid=True)
    rgba = np.concatenate([rgb, np.full((40, 100, 1), 255, np.uint8)], -1)
    assert_same_detections(run_sync(detect(core, rgba.tobytes(), 100, 40, read_asset)), want, "stretch")

    fixed = synthetic_head(3, 4, True)
    fixed.graph.input[0].type.tensor_type.shape.dim[2].dim_value = 64
    fixed.graph.input[0].type.tensor_type.shape.dim[3].dim_value = 64
    art = str(tmp_path / "raw.wi")
    build(fixed, art, postprocess=post, task="object-detection")
    session = InferenceSession(art)
    rows, count = session.run(["detections", "detections_count"], {"x": x})
    want = reference(raw, "yolov8", [64, 64], (64, 64, 0, 0), (64, 64), 0.5, 0.4, 100, sigmoid=True)
    got = [{"label": str(int(r[5])), "score": float(r[4]), "box": list(r[:4])} for r in rows[:int(count[0])]]
    assert_same_detections(got, want, "no prologue")
    assert (rows[int(count[0]):] == 0).all()
    with pytest.raises(WebinferError, match="must be known at build time"):
        build(model, str(tmp_path / "sym.wi"), postprocess=post, task="object-detection")
