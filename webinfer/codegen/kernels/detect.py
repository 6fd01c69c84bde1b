"""The detection epilogue, ``webinfer.Detect`` (written by graph/vision_epilogues.py): a YOLO-family raw head ->
at most ``max_detections`` boxes in the original image's pixels, with scores and classes, all on the GPU.

Inputs: the head ([1, 4 + C, N] anchors last, YOLOv8; [1, N, 5 + C] anchors first with objectness, YOLOv5 and
YOLOX) and, with an image prologue, the packed image (only its dims are read: they say how to undo the
letterbox). Outputs: ``detections`` float32 [max_detections, 6] (x0, y0, x1, y1, score, class; rows past the
count are zeros) and ``count`` int32 [1]. Four kernels (detect.wgsl.j2): the anchors above the score threshold
are counted per chunk, the counts scanned (select.py's scan), the candidates written in anchor order; then one
workgroup sorts them (bitonic, best first) and suppresses greedily, class by class. Only the small result is
ever read back.
"""

from __future__ import annotations

from ... import dims as D
from ..emit import wgsl_literal
from ..registry import WEBINFER_DOMAIN, lowering
from .image import letterbox_geometry
from .select import exclusive_scan

CHUNK = 64  # anchors per invocation when counting and writing candidates
NMS_WG = 256  # the one workgroup that sorts and suppresses


def _levels(ctx, n: int, strides: list[int], size: list[int]) -> list[tuple[int, int, int]]:
    """YOLOX's grid: (first anchor, grid width, stride) per level, over the model input [H, W]."""
    if not size:
        raise ctx.unsupported("a grid head (strides) needs the model input's size (\"input_size\" or a letterbox)")
    levels, first = [], 0
    for s in strides:
        gh, gw = -(-size[0] // s), -(-size[1] // s)
        levels.append((first, gw, s))
        first += gh * gw
    if first != n:
        raise ctx.unsupported(f"strides {strides} over a {size[0]}x{size[1]} input give {first} anchors, the head "
                              f"has {n}")
    return levels


def _geometry(ctx, size: list[int]) -> dict:
    """Params that map the model input's pixels back to the original image's: x = (x' - left) * iw / rw."""
    fit = ctx.attr("fit", "none")
    if fit == "none" or not ctx.has_input(1):  # boxes stay in the model input's pixels (clipped to it if known)
        h, w = size or (1, 1)
        return {"iw": w, "ih": h, "rw": w, "rh": h, "left": 0, "top": 0}
    ih, iw = ctx.inputs[1].shape
    if fit == "letterbox":
        rh, rw, top, left = letterbox_geometry(ih, iw, size, ctx.attr("align", "center"))
    else:  # "stretch": the image resized to the input's size
        rh, rw, top, left = size[0], size[1], 0, 0
    return {"iw": iw, "ih": ih, "rw": rw, "rh": rh, "left": left, "top": top}


@lowering("Detect", domain=WEBINFER_DOMAIN)
def lower_detect(ctx) -> None:
    head = ctx.inputs[0]
    if head.rank != 3 or head.shape[0] != 1:
        raise ctx.unsupported(f"the head must be [1, attributes, anchors] or [1, anchors, attributes], got "
                              f"{[D.to_text(d) for d in head.shape]} (an image prologue, --preprocess with a "
                              f"letterbox, fixes the batch and the input size)")
    anchors_last = bool(ctx.attr("anchors_last", 0))
    objectness = bool(ctx.attr("objectness", 0))
    attrs, n = (head.shape[1], head.shape[2]) if anchors_last else (head.shape[2], head.shape[1])
    if not isinstance(n, int) or not isinstance(attrs, int):
        raise ctx.unsupported("the head's anchor and attribute counts must be known at build time (fix the "
                              "input size, e.g. with a letterbox prologue)")
    classes = attrs - 4 - int(objectness)
    if classes < 1:
        raise ctx.unsupported(f"{attrs} attributes per anchor leave no class scores")
    want = ctx.attr("classes")
    if want is not None and int(want) != classes:
        raise ctx.unsupported(f"the labels name {int(want)} classes, the head scores {classes}")
    size = [int(v) for v in ctx.attr("input_size", [])]
    strides = [int(v) for v in ctx.attr("strides", [])]
    levels = _levels(ctx, n, strides, size) if strides else []
    max_det = int(ctx.attr("max_detections", 100))
    thr, iou = float(ctx.attr("score_threshold", 0.25)), float(ctx.attr("iou_threshold", 0.45))
    chunks = -(-n // CHUNK)
    part, count = ctx.temp("uint32", (chunks,)), ctx.temp("int32", (1,))
    cand, key, idx = ctx.temp("float32", (n * 6,)), ctx.temp("float32", (_pow2(n),)), ctx.temp("uint32", (_pow2(n),))
    gone = ctx.temp("uint32", (n,))
    params = {"N": n, "A": attrs, "C": classes, "chunks": chunks}
    tctx = {"anchors_last": anchors_last, "objectness": objectness, "sigmoid": bool(ctx.attr("sigmoid", 0)),
            "first_class": 5 if objectness else 4, "levels": levels, "threshold": wgsl_literal(thr, "f32"), "chunk": CHUNK}
    gh = ctx.gpu(head)
    ctx.dispatch("detect.wgsl.j2", {"head": gh}, {"part": part}, work=chunks, wg=64, params=params,
                 kind="detect_count", **tctx)
    exclusive_scan(ctx, part, count)
    ctx.dispatch("detect.wgsl.j2", {"head": gh, "part": part}, {"cand": cand, "key": key, "idx": idx}, work=chunks,
                 wg=64, params=params, kind="detect_write", **tctx)
    out, found = ctx.output(0, "float32", (max_det, 6)), ctx.output(1, "int32", (1,))
    ctx.dispatch("detect.wgsl.j2", {"cand": cand, "count": count},
                 {"key": key, "idx": idx, "gone": gone, "out": out, "found": found}, work=NMS_WG, wg=NMS_WG,
                 params={"max_det": max_det, **_geometry(ctx, size)}, kind="detect_nms", iou_threshold=wgsl_literal(iou, "f32"),
                 clip=bool(size))


def _pow2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p

