"""Runs inside Pyodide (standard library only): every case on a fresh BrowserDevice; raw outputs as JSON."""

import base64
import json
import time

from webinfer.runtime.browser import BrowserDevice, fetch_artifact
from webinfer.runtime.inference import InferenceSession
from webinfer.runtime.tensor import HostTensor


def _feeds(inputs: dict) -> dict:
    return {n: HostTensor(v["dtype"], v["shape"], base64.b64decode(v["b64"])) for n, v in inputs.items()}


def _encoded(results) -> list:
    return [{"dtype": t.dtype, "shape": list(t.shape), "b64": base64.b64encode(t.data).decode()} for t in results]


async def run_case(base: str, case: dict) -> dict:
    """One session; its run, or (``runs``: [{inputs, dims, outputs}]) several in order (a KV cache's steps)."""
    t0 = time.perf_counter()
    path = await fetch_artifact(base + case["artifact"], "/tmp/cases/" + case["name"])
    # A device per case: a validation error or a lost device stays with the case that caused it.
    device = await BrowserDevice.create()
    try:
        session = InferenceSession(path, device=device)
        names = [o.name for o in session.get_outputs()]
        runs = case.get("runs") or [{"inputs": case["inputs"]}]
        results = []
        for run in runs:
            results += await session.run_async(run.get("outputs") or names, _feeds(run["inputs"]), run.get("dims"))
        if device.errors:  # errors raised after the last read
            raise RuntimeError("WebGPU validation failed:" + device._error_text())
    finally:
        device.device.destroy()
    return {"outputs": _encoded(results), "ms": round((time.perf_counter() - t0) * 1000)}


async def run_cases(base: str, cases_json: str) -> str:
    out, adapter = {}, "?"
    for case in json.loads(cases_json):
        try:
            out[case["name"]] = await run_case(base, case)
        except Exception as e:  # noqa: BLE001 - reported per case, the test decides
            out[case["name"]] = {"error": f"{type(e).__name__}: {e}"}
    device = await BrowserDevice.create()
    adapter = device.adapter_name
    device.device.destroy()
    return json.dumps({"cases": out, "adapter": adapter})
