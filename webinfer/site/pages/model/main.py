"""Generic page: run the bundled artifact on inputs of ones (symbolic dims set to 1), preview the outputs."""

import json
import time

from webinfer.runtime.tensor import HostTensor
from webinfer.runtime.webpage import PageSession

session = None


async def setup(artifact_url, adapter, device, weight_pairs):
    global session
    session = await PageSession.open(artifact_url, adapter, device, weight_pairs)


def _ones(dtype: str, shape: list) -> HostTensor:
    import struct

    n = 1
    for d in shape:
        n *= d
    code = {"float32": "f", "float64": "d", "int64": "q", "int32": "i", "bool": "?", "uint8": "B"}.get(dtype)
    if code is None:
        raise ValueError(f"the generic page cannot make inputs of type {dtype}")
    return HostTensor(dtype, shape, struct.pack(f"<{n}{code}", *([1] * n)))


async def run_once():
    feeds = {}
    for io in session.core.get_inputs():
        feeds[io.name] = _ones(io.dtype, [d if isinstance(d, int) else 1 for d in io.shape])
    t0 = time.perf_counter()
    out = await session.run(feeds)
    ms = round((time.perf_counter() - t0) * 1000, 1)
    preview = {name: {"dtype": t.dtype, "shape": list(t.shape), "head": [_plain(v) for v in t.tolist()[:8]]}
               for name, t in out.items()}
    return json.dumps({"outputs": preview, "run_ms": ms})


def _plain(v):
    return v if not isinstance(v, float) or v - v == 0 else str(v)
