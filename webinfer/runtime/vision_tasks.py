"""Boxes and masks out: the run-time side of ``--task object-detection`` / ``image-segmentation`` /
``background-removal`` (graph/vision_epilogues.py). Standard library only, natively and in a page.

Everything is computed on the GPU; what is read back is the detection list (max_detections x 6 floats and
its count) or the image-sized mask and cut-out."""

from __future__ import annotations

from ..errors import WebinferError
from ..format.blocks import Detect, Segment
from ..format.schema import Manifest
from .vision import image_feed


def _image_feeds(m: Manifest, pixels, width, height, what: str, flag: str) -> tuple[dict, Detect | Segment]:
    if m.preprocess is None:
        raise WebinferError("this artifact takes no image (build it with --preprocess); pass the model's inputs "
                            "to run()")
    info = getattr(m, what)
    if info is None:
        raise WebinferError(f"this artifact has no {what} epilogue (build it with --task {flag})")
    return {m.preprocess.image: image_feed(pixels, width, height)}, info


def _labels(info: Detect | Segment, read_asset) -> list[str] | None:
    return read_asset(info.labels).decode("utf-8").splitlines() if info.labels else None


async def detect(core, pixels, width: int | None, height: int | None, read_asset) -> list[dict]:
    """A SessionCore built with ``--task object-detection`` on an image -> [{"label", "score", "box": [x0, y0,
    x1, y1]}], best first, boxes in the image's pixels (the class index as text when there are no labels)."""
    feeds, info = _image_feeds(core.spec, pixels, width, height, "detect", "object-detection")
    rows, count = await core.run_async([info.detections, info.count], feeds)
    n, flat = count.tolist()[0], rows.tolist()
    labels = _labels(info, read_asset)
    out = []
    for k in range(n):
        x0, y0, x1, y1, score, cls = flat[6 * k:6 * k + 6]
        c = int(cls)
        out.append({"label": labels[c] if labels and c < len(labels) else str(c), "score": score,
                    "box": [x0, y0, x1, y1]})
    return out


async def segment(core, pixels, width: int | None, height: int | None, read_asset) -> dict:
    """A SessionCore built with ``--task image-segmentation`` or ``background-removal`` on an image:
    argmax: {"segments": int32 [height, width] class map, "labels": [...] or None}; matte: {"matte": float32
    [height, width], "cutout": RGBA8 bytes of the image with the matte as alpha, "width", "height"}."""
    feeds, info = _image_feeds(core.spec, pixels, width, height, "segment", "background-removal")
    h, w = feeds[core.spec.preprocess.image].shape
    if info.mode == "argmax":
        (segments,) = await core.run_async([info.segments], feeds)
        return {"segments": segments, "labels": _labels(info, read_asset), "width": w, "height": h}
    matte, cutout = await core.run_async([info.matte, info.cutout], feeds)
    return {"matte": matte, "cutout": cutout.data, "width": w, "height": h}


def session_parts(session) -> tuple:
    """(SessionCore, read_asset) of an InferenceSession on a GPU device."""
    if getattr(session, "core", None) is None:
        raise WebinferError('detection and segmentation run on a GPU device only (device="cpu" runs generic models)')
    return session.core, session.artifact.read_asset
