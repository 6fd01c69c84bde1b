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


def _feeds(spec: dict) -> dict:
    return {name: HostTensor(v["dtype"], v["shape"], base64.b64decode(v["b64"])) for name, v in spec.items()}


def _encode(session, results) -> dict:
    return {info.name: {"dtype": t.dtype, "shape": list(t.shape), "b64": base64.b64encode(t.data).decode(),
                        "preview": [_plain(v) for v in t.tolist()[:16]]}
            for info, t in zip(session.get_outputs(), results)}


async def run_page(artifact_url: str, inputs_url: str) -> str:
    """inputs.json holds one set of feeds, or a list of them (run in order in one session: e.g. several
    image sizes through one artifact); "runs" then has every set's outputs."""
    timings = {}
    t0 = time.perf_counter()
    path = await fetch_artifact(artifact_url, "/tmp/artifact")
    spec = json.loads(await fetch_bytes(inputs_url))
    sets = [_feeds(s) for s in spec] if isinstance(spec, list) else [_feeds(spec)]
    feeds = sets[0]
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
    runs = [_encode(session, results)]
    t0 = time.perf_counter()
    for more in sets[1:]:
        runs.append(_encode(session, await session.run_async(None, more)))
    timings["more_runs_ms"] = _ms(t0)
    return json.dumps({"outputs": runs[0], "runs": runs if isinstance(spec, list) else None, "timings": timings,
                       "adapter": device.adapter_name})
