"""The manifest's model-level vision fields (format/schema.py ``Manifest.preprocess``, ``classify``, ``detect``,
``segment``): the image prologue and the task epilogues' entries, read by format/fields.py with its ``_Reader``
(``r``). Standard library only."""

from __future__ import annotations

_PREPROCESS = {  # key -> reader (graph/prepost.py add_image_prologue writes them)
    "image": lambda r, v, p: r.str(v, p, max_len=200), "input": lambda r, v, p: r.str(v, p, max_len=200),
    "channels": lambda r, v, p: r.str(v, p, ("RGB", "BGR", "RGBA")),
    "layout": lambda r, v, p: r.str(v, p, ("NCHW", "NHWC")),
    "scale": lambda r, v, p: r.number(v, p),
    "mean": lambda r, v, p: [r.number(x, f"{p}[{i}]") for i, x in enumerate(r.list(v, p))],
    "std": lambda r, v, p: [r.number(x, f"{p}[{i}]") for i, x in enumerate(r.list(v, p))],
    "mode": lambda r, v, p: r.str(v, p, ("nearest", "linear", "cubic")),
    "antialias": lambda r, v, p: r.int(v, p, 0, 1), "exclude_outside": lambda r, v, p: r.int(v, p, 0, 1),
    "cubic_coeff_a": lambda r, v, p: r.number(v, p), "nearest_mode": lambda r, v, p: r.str(v, p, max_len=40),
    "shorter": lambda r, v, p: r.int(v, p, 1, 2**31 - 1),
    "size": lambda r, v, p: [r.int(x, f"{p}[{i}]", 1, 2**31 - 1) for i, x in enumerate(r.list(v, p, 2))],
    "crop": lambda r, v, p: [r.int(x, f"{p}[{i}]", 1, 2**31 - 1) for i, x in enumerate(r.list(v, p, 2))],
    "letterbox": lambda r, v, p: [r.int(x, f"{p}[{i}]", 1, 2**31 - 1) for i, x in enumerate(r.list(v, p, 2))],
    "pad_value": lambda r, v, p: r.number(v, p), "align": lambda r, v, p: r.str(v, p, ("center", "top-left")),
}
_CLASSIFY = {
    "scores": lambda r, v, p: r.str(v, p, max_len=200), "indices": lambda r, v, p: r.str(v, p, max_len=200),
    "output": lambda r, v, p: r.str(v, p, max_len=200), "top_k": lambda r, v, p: r.int(v, p, 1, 2**31 - 1),
    "softmax": lambda r, v, p: v if isinstance(v, bool) else r.fail(p, f"expected a boolean, got {type(v).__name__}"),
    "labels": lambda r, v, p: r.str(v, p, max_len=200),
}


_NAME = lambda r, v, p: r.str(v, p, max_len=200)  # noqa: E731
_DETECT = {  # graph/vision_epilogues.py add_detection_epilogue writes them
    "detections": _NAME, "count": _NAME, "output": _NAME, "labels": _NAME,
    "head": lambda r, v, p: r.str(v, p, ("yolov8", "yolov5", "yolox")),
    "score_threshold": lambda r, v, p: r.number(v, p), "iou_threshold": lambda r, v, p: r.number(v, p),
    "max_detections": lambda r, v, p: r.int(v, p, 1, 10000),
}
_SEGMENT = {"mode": lambda r, v, p: r.str(v, p, ("argmax", "matte")), "output": _NAME, "labels": _NAME,
            "segments": _NAME, "matte": _NAME, "cutout": _NAME}


def _segment(r, v) -> dict:
    if isinstance(v, dict) and v.get("mode") == "matte":
        return _typed_object(r, v, "segment", {k: f for k, f in _SEGMENT.items() if k not in ("segments", "labels")}, ())
    return _typed_object(r, v, "segment", {k: f for k, f in _SEGMENT.items() if k not in ("matte", "cutout")},
                         ("labels",))


def _typed_object(r, v, path: str, readers: dict, optional: tuple) -> dict:
    r.obj(v, path, tuple(k for k in readers if k not in optional), optional)
    for key, value in v.items():
        readers[key](r, value, f"{path}.{key}")
    return v


def _preprocess(r, v) -> dict:
    v = _typed_object(r, v, "preprocess", _PREPROCESS, ("shorter", "size", "crop", "letterbox", "pad_value", "align"))
    if len(v["mean"]) != len(v["std"]) or len(v["mean"]) != len(v["channels"]):
        r.fail("preprocess", f"mean and std need one value per channel of {v['channels']}")
    return v


def _classify(r, v) -> dict:
    return _typed_object(r, v, "classify", _CLASSIFY, ("labels",))


VISION_READERS = {  # manifest key -> reader, in the schema's order
    "preprocess": _preprocess, "classify": _classify,
    "detect": lambda r, v: _typed_object(r, v, "detect", _DETECT, ("labels",)), "segment": _segment,
}
