"""Image classification: RGBA pixels (or an image file, natively) -> [(label, score)], best first."""

from __future__ import annotations

import os

from ..runtime.inference import InferenceSession


class ImageClassification:
    """Needs an artifact built with ``--preprocess`` and ``--postprocess`` (the prologue resizes and normalises
    on the GPU; the epilogue takes the top classes there)."""

    def __init__(self, artifact: str, device=None, kernel_class: str | None = None):
        self.session = InferenceSession(artifact, device=device, kernel_class=kernel_class)

    def __call__(self, image, width: int | None = None, height: int | None = None) -> list:
        """``image``: RGBA8 bytes with ``width``/``height``, or a path Pillow can read (native only)."""
        if isinstance(image, (str, os.PathLike)):  # (a path: pathlib's too)
            image, width, height = read_image_rgba(os.fspath(image))
        return self.session.classify(image, width, height)

    async def call_async(self, image, width: int | None = None, height: int | None = None) -> list:
        return await self.session.classify_async(image, width, height)


def read_image_rgba(path: str) -> tuple[bytes, int, int]:
    """An image file as RGBA8 bytes (Pillow, native only), with one-line errors for what cannot be read."""
    from ..errors import WebinferError

    try:
        from PIL import Image
    except ImportError:
        raise WebinferError("reading image files needs Pillow: pip install pillow") from None
    if not os.path.isfile(path):
        raise WebinferError(f"{path}: {'a folder, not an image file' if os.path.isdir(path) else 'no such file'}")
    try:
        with Image.open(path) as im:
            rgba = im.convert("RGBA")
    except Exception as e:
        raise WebinferError(f"{path}: not an image Pillow can read ({type(e).__name__})") from None
    return rgba.tobytes(), rgba.width, rgba.height
