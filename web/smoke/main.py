"""Runs inside Pyodide (standard library only): fetch the artifact, run it on BrowserDevice, return JSON."""

import base64
import json
import time

from webinfer.runtime.browser import BrowserDevice, fetch_artifact, fetch_bytes
from webinfer.runtime.inference import InferenceSession
from webinfer.runtime.tensor import HostTensor


def _plain(v):
    """JSON.parse rejects NaN and Infinity: preview them as strings."""
    return v if not isinstance(v, float) or v - v == 0 else str(v)


def _ms(t0: float) -> int:
    return round((time.perf_counter() - t0) * 1000)


async def run_page(artifact_url: str, inputs_url: str) -> str:
    timings = {}
    t0 = time.perf_counter()
    path = await fetch_artifact(artifact_url, "/tmp/artifact")
    spec = json.loads(await fetch_bytes(inputs_url))
    feeds = {name: HostTensor(v["dtype"], v["shape"], base64.b64decode(v["b64"])) for name, v in spec.items()}
    timings["fetch_ms"] = _ms(t0)
    t0 = time.perf_counter()
    device = await BrowserDevice.create()
    timings["device_ms"] = _ms(t0)
    t0 = time.perf_counter()
    session = InferenceSession(path, device=device)
    timings["session_ms"] = _ms(t0)
    t0 = time.perf_counter()
    results = await session.run_async(None, feeds)
    timings["first_run_ms"] = _ms(t0)
    t0 = time.perf_counter()
    await session.run_async(None, feeds)
    timings["second_run_ms"] = _ms(t0)
    outputs = {}
    for info, t in zip(session.get_outputs(), results):
        outputs[info.name] = {"dtype": t.dtype, "shape": list(t.shape), "b64": base64.b64encode(t.data).decode(),
                              "preview": [_plain(v) for v in t.tolist()[:16]]}
    return json.dumps({"outputs": outputs, "timings": timings, "adapter": device.adapter_name})
