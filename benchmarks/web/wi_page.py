"""Runs inside Pyodide: webinfer on the browser's WebGPU, driven by runner.py's loops (already loaded)."""

import json
import time

from webinfer.runtime.browser import BrowserDevice, fetch_artifact
from webinfer.runtime.inference import InferenceSession
from webinfer.runtime.tensor import HostTensor

_DEVICE = []


class BrowserEngine(Engine):  # noqa: F821 (Engine comes from runner.py, run first in the same namespace)
    def __init__(self, session):
        self.session = session
        self.adapter = session.device.adapter_name

    def tensor(self, dtype, shape, data):
        return HostTensor(dtype, shape, data)

    def raw(self, value):
        return value.data

    async def run(self, names, feeds):
        return await self.session.run_async(names, feeds)


async def bench_job(job_json: str) -> str:
    job = json.loads(job_json)
    t0 = time.perf_counter()
    if not _DEVICE:
        _DEVICE.append(await BrowserDevice.create())
    path = await fetch_artifact(job["artifact"], "/tmp/" + job["model"].replace(" ", "-"))
    if job.get("llm"):
        from webinfer.llm.generate import Generator

        engine = Generator.load(path, device=_DEVICE[0])
    else:
        engine = BrowserEngine(InferenceSession(path, device=_DEVICE[0]))
    load_ms = job.get("boot_ms", 0.0) + (time.perf_counter() - t0) * 1e3  # Pyodide's start, then the model
    return json.dumps(await run_job(engine, job, load_ms))  # noqa: F821
