"""Detection and segmentation epilogues (``webinfer build MODEL --task object-detection|image-segmentation|
background-removal --postprocess SPEC``), graph rewrites before the passes like graph/prepost.py's.

Detection: the raw head of a YOLO-family detector -> ``webinfer.Detect`` (codegen/kernels/detect.py: decode,
score threshold, class-aware greedy NMS, the letterbox undone) -> ``detections`` [max_detections, 6] and its
``count``. Segmentation: a mask output (per-class logits, or a one-channel matte) -> ``webinfer.ImageMask``
(codegen/kernels/mask.py: resized to the original image, argmax or alpha on the pixels) -> a class map, or a
matte and the cut-out RGBA image. Both read the prologue's image input for its size; runtime/vision_tasks.py
turns the outputs into what a caller wants.
"""

from __future__ import annotations

import os

import onnx_ir as ir

from ..errors import WebinferError
from .prepost import DOMAIN, LABELS_ASSET, add_classifier_epilogue, make_attr, read_spec, unique_name

DETECT_KEYS = {"output", "head", "objectness", "strides", "sigmoid", "score_threshold", "iou_threshold",
               "max_detections", "labels", "input_size"}
SEGMENT_KEYS = {"output", "mode", "sigmoid", "labels"}
# head layout -> (anchors last, objectness, default strides: a grid to decode)
HEADS = {"yolov8": (True, False, []), "yolov5": (False, True, []), "yolox": (False, True, [8, 16, 32])}


TASKS = ("image-classification", "object-detection", "image-segmentation", "background-removal")


def add_task_epilogue(model: ir.Model, task: str | None, spec, pre: dict | None) -> tuple[str, dict, dict]:
    """The epilogue of ``task`` (default: classification) -> (its manifest key, its entry, assets)."""
    if task in (None, "image-classification"):
        if spec is None:
            raise WebinferError("--task image-classification needs --postprocess CLASSIFY.json")
        return ("classify", *add_classifier_epilogue(model, spec))
    if task == "object-detection":
        return ("detect", *add_detection_epilogue(model, spec if spec is not None else {}, pre))
    if task in ("image-segmentation", "background-removal"):
        return ("segment", *add_segmentation_epilogue(model, spec, pre, task))
    raise WebinferError(f"--task {task!r}: choose from {', '.join(TASKS)}")


def _number(spec: dict, key: str, default: float, lo: float, hi: float) -> float:
    v = spec.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
        raise WebinferError(f"--postprocess: {key} must be a number in [{lo}, {hi}], got {v!r}")
    return float(v)


def _flag(spec: dict, key: str, default: bool) -> bool:
    v = spec.get(key, default)
    if not isinstance(v, bool):
        raise WebinferError(f"--postprocess: {key} must be true or false")
    return v


def _output(graph: ir.Graph, name: str | None) -> ir.Value:
    out = next((v for v in graph.outputs if v.name == name), None) if name else graph.outputs[0]
    if out is None:
        raise WebinferError(f"--postprocess: the model has no output {name!r}")
    return out


def _labels(spec: dict, base: str) -> list[str] | None:
    if spec.get("labels") is None:
        return None
    path = os.path.join(base, spec["labels"])
    if not os.path.isfile(path):
        raise WebinferError(f"--postprocess: labels file {path} does not exist")
    with open(path, encoding="utf-8") as f:
        labels = f.read().splitlines()
    while labels and not labels[-1].strip():
        labels.pop()
    if not labels:
        raise WebinferError(f"--postprocess: {path} names no labels")
    return labels


def _geometry(graph: ir.Graph, pre: dict | None, spec: dict, what: str) -> tuple[ir.Value | None, dict]:
    """The image input and how the prologue placed it in the model input (attributes of the epilogue op)."""
    if pre is None:  # boxes in the model input's pixels; its size from the spec, or a static NCHW image input
        size = spec.get("input_size")
        if size is None:
            images = [v for v in graph.inputs if v.shape is not None and len(v.shape) == 4]
            dims = list(images[0].shape)[2:] if len(images) == 1 else []
            size = dims if dims and all(isinstance(d, int) for d in dims) else None
        return None, ({"fit": "none"} if size is None else {"fit": "none", "input_size": _size(size)})
    image = next(v for v in graph.inputs if v.name == pre["image"])
    if "letterbox" in pre:
        return image, {"fit": "letterbox", "input_size": pre["letterbox"], "align": pre.get("align", "center")}
    if "size" in pre and "crop" not in pre:
        return image, {"fit": "stretch", "input_size": pre["size"]}
    raise WebinferError(f"--postprocess: {what} maps back to the image through a letterbox "
                        '({"resize": {"letterbox": [h, w]}}) or a plain resize ({"resize": {"size": [h, w]}}), '
                        "not a centre crop")


def _size(v) -> list[int]:
    if not (isinstance(v, list) and len(v) == 2 and all(isinstance(d, int) and d > 0 for d in v)):
        raise WebinferError(f"--postprocess: input_size must be [height, width], got {v!r}")
    return v


def _add_outputs(graph: ir.Graph, node: ir.Node, wanted: list[tuple[str, ir.DataType, ir.Shape]]) -> list[str]:
    taken = {v.name for v in graph.inputs} | {v.name for v in graph.outputs}
    names = []
    for value, (want, dtype, shape) in zip(node.outputs, wanted):
        value.name = unique_name(want, taken)
        value.dtype, value.shape = dtype, shape
        graph.outputs.append(value)
        names.append(value.name)
    return names


def add_detection_epilogue(model: ir.Model, spec, pre: dict | None) -> tuple[dict, dict[str, bytes]]:
    """Append ``webinfer.Detect`` to the head output; returns the manifest's ``detect`` entry and the labels
    asset."""
    spec, base = read_spec(spec, "postprocess", DETECT_KEYS)
    graph = model.graph
    head = _output(graph, spec.get("output"))
    kind = spec.get("head", "yolov8")
    if kind not in HEADS:
        raise WebinferError(f"--postprocess: head {kind!r} (choose from {', '.join(HEADS)})")
    anchors_last, objectness, strides = HEADS[kind]
    objectness = _flag(spec, "objectness", objectness)
    strides = spec.get("strides", strides)
    if not isinstance(strides, list) or not all(isinstance(s, int) and s > 0 for s in strides):
        raise WebinferError(f"--postprocess: strides must be a list of positive integers, got {strides!r}")
    max_det = spec.get("max_detections", 100)
    if isinstance(max_det, bool) or not isinstance(max_det, int) or not 1 <= max_det <= 10000:
        raise WebinferError(f"--postprocess: max_detections must be an integer in 1..10000, got {max_det!r}")
    score, iou = _number(spec, "score_threshold", 0.25, -1e30, 1e30), _number(spec, "iou_threshold", 0.45, 0, 1)
    image, geometry = _geometry(graph, pre, spec, "the detection epilogue")
    labels = _labels(spec, base)
    attrs = {"anchors_last": int(anchors_last), "objectness": int(objectness), "sigmoid": int(_flag(spec, "sigmoid",
             False)), "max_detections": max_det, "score_threshold": score, "iou_threshold": iou, **geometry}
    if strides:
        attrs["strides"] = strides
    if labels:
        attrs["classes"] = len(labels)
    node = ir.Node(DOMAIN, "Detect", [head] + ([image] if image is not None else []), name="detect",
                   attributes=[make_attr(k, v) for k, v in sorted(attrs.items())], num_outputs=2)
    graph.append(node)
    names = _add_outputs(graph, node, [("detections", ir.DataType.FLOAT, ir.Shape([max_det, 6])),
                                       ("detections_count", ir.DataType.INT32, ir.Shape([1]))])
    model.opset_imports.setdefault(DOMAIN, 1)
    info = {"detections": names[0], "count": names[1], "output": head.name, "head": kind,
            "score_threshold": score, "iou_threshold": iou, "max_detections": max_det}
    assets = {}
    if labels:
        info["labels"] = LABELS_ASSET
        assets[LABELS_ASSET] = ("\n".join(labels) + "\n").encode()
    return info, assets


def add_segmentation_epilogue(model: ir.Model, spec, pre: dict | None, task: str) -> tuple[dict, dict[str, bytes]]:
    """Append ``webinfer.ImageMask`` to the mask output; returns the manifest's ``segment`` entry and assets."""
    spec, base = read_spec(spec or {}, "postprocess", SEGMENT_KEYS)
    if pre is None:
        raise WebinferError(f"--task {task} needs an image prologue (--preprocess) to resize the mask to")
    graph = model.graph
    mask = _output(graph, spec.get("output"))
    mode = spec.get("mode", "matte" if task == "background-removal" else "argmax")
    if mode not in ("argmax", "matte"):
        raise WebinferError(f"--postprocess: mode {mode!r} (choose argmax or matte)")
    image, geometry = _geometry(graph, pre, spec, "the mask epilogue")
    labels = _labels(spec, base) if mode == "argmax" else None
    attrs = {"mode": mode, "sigmoid": int(_flag(spec, "sigmoid", False)), **geometry}
    if labels:
        attrs["classes"] = len(labels)
    plane = ir.Shape(list(image.shape))
    wanted = ([("segments", ir.DataType.INT32, plane)] if mode == "argmax" else
              [("matte", ir.DataType.FLOAT, plane), ("cutout", ir.DataType.UINT32, ir.Shape(list(image.shape)))])
    node = ir.Node(DOMAIN, "ImageMask", [mask, image], name="image_mask",
                   attributes=[make_attr(k, v) for k, v in sorted(attrs.items())], num_outputs=len(wanted))
    graph.append(node)
    names = _add_outputs(graph, node, wanted)
    model.opset_imports.setdefault(DOMAIN, 1)
    info = {"mode": mode, "output": mask.name, **dict(zip(("segments",) if mode == "argmax" else ("matte", "cutout"),
                                                          names))}
    assets = {}
    if labels:
        info["labels"] = LABELS_ASSET
        assets[LABELS_ASSET] = ("\n".join(labels) + "\n").encode()
    return info, assets
