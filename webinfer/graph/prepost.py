"""Pre- and post-processing recorded in the artifact, as graph rewrites before the passes.

``--preprocess image.json``: a new input ``image`` (uint32 [image_height, image_width]: RGBA8 pixels, 4 bytes
per u32, R in the low byte, i.e. the bytes of a canvas' ImageData or of a PIL RGBA image as they are)
replaces the model's image input: ``webinfer.ImageResize`` (resize with the model's interpolation, centre
crop, channel order; codegen/kernels/image.py), then ``(v * scale - mean) / std`` and the layout as ONNX
nodes. So a page or a Python caller passes the pixels of an image of any size.

``--postprocess classify.json``: the scores output -> optional Softmax -> TopK, as two new outputs (scores,
indices); the labels file travels as an asset. ``runtime/vision.py`` turns them into (label, score) pairs.
"""

from __future__ import annotations

import json
import os

import numpy as np
import onnx_ir as ir

from ..errors import WebinferError
from .passes._util import new_initializer

DOMAIN = "webinfer"
LABELS_ASSET = "labels.txt"
IMAGE_KEYS = {"input", "name", "resize", "crop", "interpolation", "antialias", "channels", "scale", "mean", "std",
              "layout"}
CLASSIFY_KEYS = {"output", "softmax", "top_k", "labels"}
_CHANNELS = {"RGB": [0, 1, 2], "BGR": [2, 1, 0], "RGBA": [0, 1, 2, 3]}
# interpolation -> Resize attributes; antialias (the default) gives PIL's / torchvision's resize (a filter
# widened by the shrink factor, taps outside the image dropped), without it OpenCV's.
_MODES = {"bilinear": "linear", "bicubic": "cubic", "nearest": "nearest"}


def read_spec(spec, what: str, keys: set[str]) -> tuple[dict, str]:
    """A spec given as a dict or a JSON file -> (dict, the folder its relative paths start from)."""
    base = os.getcwd()
    if isinstance(spec, (str, os.PathLike)):
        if not os.path.isfile(spec):
            raise WebinferError(f"--{what} {spec}: no such file")
        try:
            with open(spec, encoding="utf-8") as f:
                spec_dict = json.load(f)
        except ValueError as e:
            raise WebinferError(f"--{what} {spec}: not valid JSON ({e})") from None
        base, spec = os.path.dirname(os.path.abspath(spec)), spec_dict
    if not isinstance(spec, dict):
        raise WebinferError(f"--{what}: the spec must be a JSON object")
    unknown = sorted(set(spec) - keys)
    if unknown:
        raise WebinferError(f"--{what}: unknown key {unknown[0]!r} (known: {', '.join(sorted(keys))})")
    return spec, base


def _ints(value, n: int, what: str) -> list[int]:
    if not (isinstance(value, list) and len(value) == n and all(isinstance(v, int) and v > 0 for v in value)):
        raise WebinferError(f"--preprocess: {what} must be a list of {n} positive integers, got {value!r}")
    return value


def _floats(value, n: int, what: str) -> np.ndarray:
    if isinstance(value, (int, float)):
        value = [value]
    if not (isinstance(value, list) and len(value) in (1, n) and all(isinstance(v, (int, float)) for v in value)):
        raise WebinferError(f"--preprocess: {what} must be a number or a list of {n} numbers, got {value!r}")
    return np.broadcast_to(np.array(value, np.float64), (n,))


def _graph_input(graph: ir.Graph, name: str | None, flag: str, rank: int) -> ir.Value:
    candidates = [v for v in graph.inputs if not v.is_initializer() and v.shape is not None and len(v.shape) == rank]
    if name is not None:
        found = [v for v in graph.inputs if v.name == name]
        if not found:
            raise WebinferError(f"--{flag}: the model has no input {name!r}")
        return found[0]
    if len(candidates) != 1:
        raise WebinferError(f"--{flag}: name the model's image input with \"input\" (rank-{rank} inputs: "
                            f"{[v.name for v in candidates]})")
    return candidates[0]


def _resize_attrs(spec: dict) -> dict:
    interp = spec.get("interpolation", "bilinear")
    if interp not in _MODES:
        raise WebinferError(f"--preprocess: interpolation {interp!r} (choose from {', '.join(_MODES)})")
    antialias = spec.get("antialias", True)
    if not isinstance(antialias, bool):
        raise WebinferError("--preprocess: antialias must be true or false")
    attrs = {"mode": _MODES[interp], "antialias": int(antialias and interp != "nearest"),
             "exclude_outside": int(antialias), "cubic_coeff_a": -0.5 if antialias else -0.75,
             "nearest_mode": "round_prefer_ceil"}
    resize = spec.get("resize")
    if resize is not None:
        if isinstance(resize, dict) and "letterbox" in resize:
            return _letterbox_attrs(resize, attrs, spec)
        if not isinstance(resize, dict) or len(resize) != 1 or not set(resize) <= {"shorter", "size"}:
            raise WebinferError('--preprocess: resize must be {"shorter": N}, {"size": [height, width]} or '
                                '{"letterbox": [height, width], "pad": 114, "align": "center"}')
        if "shorter" in resize:
            attrs["shorter"] = _ints([resize["shorter"]], 1, "resize.shorter")[0]
        else:
            attrs["size"] = _ints(resize["size"], 2, "resize.size")
    if spec.get("crop") is not None:
        attrs["crop"] = _ints(spec["crop"], 2, "crop")
        short = attrs.get("shorter", 0)
        if short and short < max(attrs["crop"]) or any(c > s for c, s in zip(attrs["crop"], attrs.get("size") or [])):
            raise WebinferError(f"--preprocess: the crop {attrs['crop']} is larger than the resized image")
    return attrs


def _letterbox_attrs(resize: dict, attrs: dict, spec: dict) -> dict:
    """Letterbox (detectors): the image scaled to fit [height, width] keeping its aspect (each side rounded half
    up), placed at the centre (or the top-left corner) and the rest filled with ``pad`` (0..255 units, before
    normalisation). codegen/kernels/image.py ``letterbox_geometry`` says where the picture lands; the detection
    and mask epilogues undo it with the same dims."""
    unknown = sorted(set(resize) - {"letterbox", "pad", "align"})
    if unknown:
        raise WebinferError(f"--preprocess: resize.{unknown[0]}: a letterbox takes letterbox, pad and align")
    if spec.get("crop") is not None:
        raise WebinferError("--preprocess: a letterbox takes no crop")
    attrs["letterbox"] = _ints(resize["letterbox"], 2, "resize.letterbox")
    pad = resize.get("pad", 114)
    if not isinstance(pad, (int, float)) or isinstance(pad, bool) or not 0 <= pad <= 255:
        raise WebinferError(f"--preprocess: resize.pad must be a number in 0..255, got {pad!r}")
    align = resize.get("align", "center")
    if align not in ("center", "top-left"):
        raise WebinferError(f"--preprocess: resize.align {align!r} (choose center or top-left)")
    attrs["pad_value"], attrs["align"] = float(pad), align
    return attrs


def add_image_prologue(model: ir.Model, spec) -> dict:
    """Replace the model's image input by the packed RGBA8 ``image`` input and the prologue; returns the
    manifest's ``preprocess`` entry."""
    spec, _ = read_spec(spec, "preprocess", IMAGE_KEYS)
    graph = model.graph
    x = _graph_input(graph, spec.get("input"), "preprocess", 4)
    layout = spec.get("layout", "NCHW")
    if layout not in ("NCHW", "NHWC"):
        raise WebinferError(f"--preprocess: layout {layout!r} (choose NCHW or NHWC)")
    order = spec.get("channels", "RGB")
    if order not in _CHANNELS:
        raise WebinferError(f"--preprocess: channels {order!r} (choose from {', '.join(_CHANNELS)})")
    channels = _CHANNELS[order]
    n = len(channels)
    attrs = _resize_attrs(spec)
    model_c = x.shape[1 if layout == "NCHW" else 3]
    if model_c != n:
        raise WebinferError(f"--preprocess: input {x.name!r} {list(x.shape)} ({layout}) has {model_c} channels, "
                            f"channels {order!r} gives {n}")
    name = spec.get("name", "image")
    if any(v.name == name for v in graph.inputs):
        raise WebinferError(f"--preprocess: the model already has an input named {name!r} (pick another \"name\")")
    image = ir.Value(name=name, type=ir.TensorType(ir.DataType.UINT32),
                     shape=ir.Shape([f"{name}_height", f"{name}_width"]))
    resize = ir.Node(DOMAIN, "ImageResize", [image], attributes=[make_attr(k, v) for k, v in
                                                                 sorted({"channels": channels, **attrs}.items())],
                     name="preprocess_resize", num_outputs=1)
    scale = float(spec.get("scale", 1 / 255))
    mean, std = _floats(spec.get("mean", 0.0), n, "mean"), _floats(spec.get("std", 1.0), n, "std")
    if (std == 0).any() or scale == 0:
        raise WebinferError("--preprocess: std and scale must not be zero")
    # (v * scale - mean) / std == (v - mean / scale) / (std / scale): one Sub and one Div, fused into one kernel
    shift = new_initializer(graph, (mean / scale).astype(np.float32).reshape(1, n, 1, 1), "preprocess_mean")
    div = new_initializer(graph, (std / scale).astype(np.float32).reshape(1, n, 1, 1), "preprocess_std")
    nodes = [resize, ir.Node("", "Sub", [resize.outputs[0], shift], name="preprocess_sub", num_outputs=1)]
    nodes.append(ir.Node("", "Div", [nodes[-1].outputs[0], div], name="preprocess_div", num_outputs=1))
    if layout == "NHWC":
        nodes.append(ir.Node("", "Transpose", [nodes[-1].outputs[0]], attributes=[ir.AttrInt64s("perm", [0, 2, 3, 1])],
                             name="preprocess_layout", num_outputs=1))
    if x.dtype != ir.DataType.FLOAT:
        nodes.append(ir.Node("", "Cast", [nodes[-1].outputs[0]], attributes=[ir.AttrInt64("to", x.dtype.value)],
                             name="preprocess_cast", num_outputs=1))
    shape = _prologue_shape(x, attrs, n, layout)
    planar = ir.Shape([shape[0], n, *(shape[2:] if layout == "NCHW" else shape[1:3])])
    for i, node in enumerate(nodes):  # (shapes known here let the epilogue pass fold the normalisation in)
        node.outputs[0].dtype = ir.DataType.FLOAT
        node.outputs[0].shape = planar if i < 3 else None  # (resize, sub, div: NCHW)
    out = nodes[-1].outputs[0]
    out.dtype, out.shape = x.dtype, shape
    graph.insert_before(next(iter(graph)), nodes)
    x.replace_all_uses_with(out)
    graph.inputs[graph.inputs.index(x)] = image
    model.opset_imports.setdefault(DOMAIN, 1)
    return {"image": name, "input": x.name, "channels": order, "layout": layout, "scale": scale,
            "mean": mean.tolist(), "std": std.tolist(), **{k: v for k, v in attrs.items() if k != "channels"}}


def make_attr(name: str, v) -> ir.Attr:
    if isinstance(v, list):
        return ir.AttrInt64s(name, v)
    if isinstance(v, float):
        return ir.AttrFloat32(name, v)
    return ir.AttrString(name, v) if isinstance(v, str) else ir.AttrInt64(name, v)


def _prologue_shape(x: ir.Value, attrs: dict, n: int, layout: str) -> ir.Shape:
    """The prologue's output shape; a model input of fixed batch, height or width must match it."""
    made = attrs.get("crop") or attrs.get("size") or attrs.get("letterbox") or [None, None]
    shape = [1, n, *made] if layout == "NCHW" else [1, *made, n]
    for want, got in zip(x.shape, shape):
        if isinstance(want, int) and want != got:
            shown = ["?" if d is None else d for d in shape]
            raise WebinferError(f"--preprocess: input {x.name!r} is {list(x.shape)}, the prologue gives {shown} "
                                f"(one image, its \"crop\" or \"resize\": {{\"size\": ...}})")
    return ir.Shape([ir.SymbolicDim(None) if d is None else d for d in shape])


def add_classifier_epilogue(model: ir.Model, spec) -> tuple[dict, dict[str, bytes]]:
    """Append optional Softmax and TopK to the scores output; returns the manifest's ``classify`` entry and the
    labels asset."""
    spec, base = read_spec(spec, "postprocess", CLASSIFY_KEYS)
    graph = model.graph
    name = spec.get("output")
    scores = next((v for v in graph.outputs if v.name == name), None) if name else graph.outputs[0]
    if scores is None:
        raise WebinferError(f"--postprocess: the model has no output {name!r}")
    dims = list(scores.shape or [])
    many = [d for d in dims if not isinstance(d, int) or d != 1]
    if len(many) != 1 or not isinstance(many[0], int):  # (a symbolic batch is 1 for one image)
        many = [d for d in dims if isinstance(d, int) and d != 1]
    if not dims or len(many) > 1 or (not many and any(not isinstance(d, int) for d in dims)):
        raise WebinferError(f"--postprocess: output {scores.name!r} {[str(d) for d in dims]} must hold one row of "
                            f"class scores (e.g. [1, classes])")
    classes = many[0] if many else 1
    k = spec.get("top_k", min(5, classes))
    if not isinstance(k, int) or not 1 <= k <= classes:
        raise WebinferError(f"--postprocess: top_k must be an integer in 1..{classes}")
    softmax = spec.get("softmax", False)
    if not isinstance(softmax, bool):
        raise WebinferError("--postprocess: softmax must be true or false")
    assets = {}
    if spec.get("labels") is not None:
        labels = _read_labels(os.path.join(base, spec["labels"]), classes)
        assets[LABELS_ASSET] = ("\n".join(labels) + "\n").encode()
    shape = new_initializer(graph, np.array([1, classes], np.int64), "classify_shape")
    nodes = [ir.Node("", "Reshape", [scores, shape], name="classify_rows", num_outputs=1)]
    if softmax:
        nodes.append(ir.Node("", "Softmax", [nodes[-1].outputs[0]], attributes=[ir.AttrInt64("axis", -1)],
                             name="classify_softmax", num_outputs=1))
    kk = new_initializer(graph, np.array([k], np.int64), "classify_k")
    top = ir.Node("", "TopK", [nodes[-1].outputs[0], kk], attributes=[ir.AttrInt64("axis", -1)], name="classify_topk",
                  num_outputs=2)
    nodes.append(top)
    graph.extend(nodes)
    taken = {v.name for v in graph.inputs} | {v.name for v in graph.outputs}
    names = []
    for value, want, dtype in ((top.outputs[0], "top_scores", scores.dtype), (top.outputs[1], "top_indices",
                                                                              ir.DataType.INT64)):
        value.name = unique_name(want, taken)
        value.dtype, value.shape = dtype, ir.Shape([1, k])
        graph.outputs.append(value)
        names.append(value.name)
    info = {"scores": names[0], "indices": names[1], "top_k": k, "softmax": softmax, "output": scores.name}
    if assets:
        info["labels"] = LABELS_ASSET
    return info, assets


def _read_labels(path: str, classes: int) -> list[str]:
    if not os.path.isfile(path):
        raise WebinferError(f"--postprocess: labels file {path} does not exist")
    with open(path, encoding="utf-8") as f:
        labels = f.read().splitlines()
    while labels and not labels[-1].strip():
        labels.pop()
    if len(labels) != classes:
        raise WebinferError(f"--postprocess: {path} has {len(labels)} labels, the model scores {classes} classes")
    return labels


def unique_name(name: str, taken: set[str]) -> str:
    out, i = name, 0
    while out in taken:
        i += 1
        out = f"{name}_{i}"
    taken.add(out)
    return out
