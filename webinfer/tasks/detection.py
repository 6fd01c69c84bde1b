"""Object detection: an image file or RGBA8 pixels -> [{"label", "score", "box": [x0, y0, x1, y1]}], best first,
boxes in the image's pixels."""

from __future__ import annotations

import os

from ..runtime import vision_tasks
from ..runtime.inference import InferenceSession
from ..runtime.session import run_sync
from .classification import read_image_rgba


class ObjectDetection:
    """Needs an artifact built with ``--preprocess`` (a letterbox) and ``--task object-detection`` (decoding,
    threshold and non-maximum suppression run on the GPU; graph/vision_epilogues.py)."""

    def __init__(self, artifact: str, device=None, kernel_class: str | None = None):
        self.session = InferenceSession(artifact, device=device, kernel_class=kernel_class)

    def __call__(self, image, width: int | None = None, height: int | None = None) -> list[dict]:
        """``image``: RGBA8 bytes with ``width``/``height``, or a path Pillow can read (native only)."""
        if isinstance(image, (str, os.PathLike)):  # (a path: pathlib's too)
            image, width, height = read_image_rgba(os.fspath(image))
        return run_sync(self.call_async(image, width, height))

    async def call_async(self, image, width: int | None = None, height: int | None = None) -> list[dict]:
        core, read_asset = vision_tasks.session_parts(self.session)
        return await vision_tasks.detect(core, image, width, height, read_asset)
