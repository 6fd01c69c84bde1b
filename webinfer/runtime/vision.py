"""Images in, labels out: the run-time side of an artifact built with ``--preprocess`` / ``--postprocess``
(graph/prepost.py). Standard library only: the same code runs natively and in a page (Pyodide).

The image input is uint32 [height, width]: one RGBA8 pixel per word, R in the low byte, so the bytes of a
canvas' ImageData or of a PIL/numpy RGBA image are the input as they are (nothing is converted on the CPU).
"""

from __future__ import annotations

from ..errors import WebinferError
from ..format.schema import Manifest
from .tensor import HostTensor


def image_feed(pixels, width: int | None = None, height: int | None = None) -> HostTensor:
    """RGBA8 pixels as the packed image input. ``pixels``: a numpy uint8 array [height, width, 4] (or 3
    channels: opaque alpha is added), a HostTensor, or bytes-like of width * height * 4 with the sizes."""
    if isinstance(pixels, HostTensor):
        if pixels.dtype == "uint8" and len(pixels.shape) == 3 and pixels.shape[2] == 4:
            return HostTensor("uint32", pixels.shape[:2], pixels.data)
        if pixels.dtype == "uint32" and len(pixels.shape) == 2:
            return pixels
        raise WebinferError(f"image: expected uint8 [height, width, 4] pixels, got {pixels}")
    if hasattr(pixels, "shape") and hasattr(pixels, "tobytes"):  # numpy, without importing it
        shape = tuple(pixels.shape)
        if len(shape) != 3 or shape[2] not in (3, 4) or str(pixels.dtype) != "uint8":
            raise WebinferError(f"image: expected uint8 pixels [height, width, 4] (RGBA) or [.., 3] (RGB), got "
                                f"{pixels.dtype} {list(shape)}")
        height, width = shape[0], shape[1]
        data = pixels.tobytes(order="C")
        if shape[2] == 3:
            data = _with_alpha(data)
    else:
        if not isinstance(pixels, (bytes, bytearray, memoryview)):
            raise WebinferError(f"image: expected an image file's path, a uint8 [height, width, 4] array or RGBA8 "
                                f"bytes with width and height; got {type(pixels).__name__}")
        if width is None or height is None:
            raise WebinferError("image: raw pixel bytes need their width and height (an image file: pass its path)")
        data = bytes(pixels)
        if len(data) != width * height * 4:
            raise WebinferError(f"image: {len(data)} bytes are not {width}x{height} RGBA8 pixels "
                                f"({width * height * 4} bytes)")
    if width < 1 or height < 1:
        raise WebinferError(f"image: {width}x{height} has no pixels")
    return HostTensor("uint32", [height, width], data)


def _with_alpha(rgb: bytes) -> bytes:
    n = len(rgb) // 3
    out = bytearray(b"\xff" * (4 * n))
    for c in range(3):
        out[c::4] = rgb[c::3]
    return bytes(out)


def pack_image(spec: Manifest, feeds: dict) -> dict:
    """An artifact with an image prologue also takes uint8 [height, width, 4 or 3] pixels for its image input."""
    if spec.preprocess is None:
        return feeds
    name = spec.preprocess.image
    value = feeds.get(name)
    if value is not None and str(getattr(value, "dtype", "")) == "uint8" and len(getattr(value, "shape", ())) == 3:
        return dict(feeds, **{name: image_feed(value)})
    return feeds


async def classify(core, pixels, width: int | None, height: int | None, read_asset) -> list[tuple[str, float]]:
    """Run a SessionCore built with --preprocess and --postprocess on an image: [(label, score)], best first
    (the class index as text when the artifact has no labels). ``read_asset(name)`` -> bytes of an asset."""
    m = core.spec
    if m.preprocess is None:
        raise WebinferError("this artifact takes no image (build it with --preprocess); pass the model's inputs "
                            "to run()")
    info = m.classify
    if info is None:
        raise WebinferError("this artifact has no classification epilogue (build it with --postprocess)")
    feeds = {m.preprocess.image: image_feed(pixels, width, height)}
    scores, indices = await core.run_async([info.scores, info.indices], feeds)
    labels = read_asset(info.labels).decode("utf-8").splitlines() if info.labels else None
    return [(labels[i] if labels else str(i), s) for s, i in zip(scores.tolist(), indices.tolist())]
