"""Runs one artifact at 200 random image sizes in a fresh process and prints JSON: resident memory, GPU bytes
not owned by the session, plan count and the worst difference from onnxruntime.

A fresh process because resident memory is only a leak signal when nothing else shares the heap: inside the
full suite, other tests' threads and freed arenas move it by megabytes (CI saw +8 MiB with no leak here)."""

from __future__ import annotations

import gc
import json
import sys

import numpy as np
import onnxruntime as ort
import wgpu

from webinfer.runtime.inference import InferenceSession
from webinfer.runtime.plan_cache import MAX_PLANS


def _gpu_resource_bytes() -> int:
    return wgpu.diagnostics.object_counts.get_dict()["total"]["resource_mem"]


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def soak(artifact: str, model_path: str, runs: int) -> dict:
    reference = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    gc.collect()
    before = _gpu_resource_bytes()
    session = InferenceSession(artifact)
    core = session._core
    rng = np.random.default_rng(1)
    rss, leaks, plans, worst = [], [], [], 0.0
    for i in range(runs):
        h, w = (int(v) for v in rng.integers(1, 72, 2))
        x = rng.random((1, 3, h, w), dtype=np.float32)
        got = session.run(None, {"x": x})[0]
        if i % 40 == 0:
            want = reference.run(None, {"x": x})[0]
            worst = max(worst, float(np.max(np.abs(got - want) / (1e-4 + 1e-4 * np.abs(want)))))
        if i % 10 == 9:
            gc.collect()
            plans.append(len(core.plans()))
            # every GPU byte wgpu holds for this session is a weight or one of the cached plans' buffers
            leaks.append(_gpu_resource_bytes() - before - core.gpu_bytes()["total"])
            rss.append(_rss_mib())
    biggest = max(p.bytes for p in core.plans())
    return {"rss": rss, "leaks": leaks, "plans": plans, "max_plans": MAX_PLANS, "worst_tol_ratio": worst,
            "plan_bytes": core.gpu_bytes()["plans"], "biggest_plan": biggest}


if __name__ == "__main__":
    print(json.dumps(soak(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
