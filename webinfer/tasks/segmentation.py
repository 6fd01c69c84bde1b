"""Image segmentation and background removal: an image file or RGBA8 pixels -> the mask at the image's size
(a class map, or a matte and the cut-out RGBA image), computed on the GPU."""

from __future__ import annotations

import os

from ..runtime import vision_tasks
from ..runtime.inference import InferenceSession
from ..runtime.session import run_sync
from .classification import read_image_rgba


class ImageSegmentation:
    """Needs an artifact built with ``--preprocess`` and ``--task image-segmentation`` (per-class logits ->
    ``{"segments": int32 [height, width], "labels"}``) or ``--task background-removal`` (a matte ->
    ``{"matte": float32 [height, width], "cutout": RGBA8 bytes}``), with ``width`` and ``height``."""

    def __init__(self, artifact: str, device=None, kernel_class: str | None = None):
        self.session = InferenceSession(artifact, device=device, kernel_class=kernel_class)

    def __call__(self, image, width: int | None = None, height: int | None = None) -> dict:
        """``image``: RGBA8 bytes with ``width``/``height``, or a path Pillow can read (native only). Tensors
        come back as numpy arrays where numpy is importable."""
        if isinstance(image, (str, os.PathLike)):  # (a path: pathlib's too)
            image, width, height = read_image_rgba(os.fspath(image))
        out = run_sync(self.call_async(image, width, height))
        return {k: _array(v) for k, v in out.items()}

    async def call_async(self, image, width: int | None = None, height: int | None = None) -> dict:
        core, read_asset = vision_tasks.session_parts(self.session)
        return await vision_tasks.segment(core, image, width, height, read_asset)


def _array(v):
    if not hasattr(v, "dtype") or not hasattr(v, "data"):
        return v
    try:
        import numpy as np
    except ImportError:
        return v
    return np.frombuffer(v.data, np.dtype(v.dtype)).reshape(v.shape)
