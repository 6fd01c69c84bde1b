"""Kernel microbenchmarks on one adapter: its measured peak (an FMA-throughput kernel, a copy kernel) and
webinfer's own matmul / matrix-vector kernels as a share of that peak.

Everything goes through webinfer's ``Device`` interface, so the times are of the same submits a session
makes: K dispatches in one command buffer, then a 16-byte readback to wait for the GPU (K is chosen so the
wait and per-submit costs are a few percent). webinfer's kernels come from building one-op ONNX models.
"""

from __future__ import annotations

import os
import tempfile
import time

FMA_CHAINS, FMA_ITERS, FMA_WG = 8, 256, 64
FMA_WGSL = """
@group(0) @binding(0) var<storage, read_write> out: array<vec4<f32>>;
@compute @workgroup_size({wg})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {{
  let s = f32(gid.x) * 1e-7;
  {init}
  let m = vec4<f32>(0.99990, 0.99991, 0.99992, 0.99993);
  let k = vec4<f32>(1e-4, 2e-4, 3e-4, 4e-4);
  for (var i = 0u; i < {iters}u; i = i + 1u) {{
    {body}
  }}
  out[gid.x] = {total};
}}
"""
COPY_WGSL = """
@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  dst[gid.x] = src[gid.x];
}
"""


def fma_source() -> str:
    names = [f"a{i}" for i in range(FMA_CHAINS)]
    init = " ".join(f"var {n} = vec4<f32>(s + {i}.0, s + {i}.25, s + {i}.5, s + {i}.75);" for i, n in enumerate(names))
    body = " ".join(f"{n} = fma({n}, m, k);" for n in names)
    return FMA_WGSL.format(wg=FMA_WG, init=init, iters=FMA_ITERS, body=body, total=" + ".join(names))


class Timer:
    """Repeats a list of dispatches in one submit and waits on a tiny readback."""

    def __init__(self, device):
        self.device = device
        self.readback = device.create_buffer(16, "readback")

    def seconds(self, dispatches: list, any_buffer, repeat: int) -> float:
        from webinfer.runtime.session import run_sync

        t0 = time.perf_counter()
        self.device.submit(dispatches * repeat, [(any_buffer, 0, self.readback, 0, 16)])
        run_sync(self.device.read(self.readback, 16))
        return time.perf_counter() - t0

    def measure(self, dispatches: list, any_buffer, budget_s: float, samples: int) -> list[float]:
        """Seconds per repetition, ``samples`` times, with repeats sized to ``budget_s`` per sample."""
        self.seconds(dispatches, any_buffer, 1)  # compile in the driver
        one = self.seconds(dispatches, any_buffer, 1)
        repeat = max(1, min(1000, int(budget_s / max(one, 1e-6))))
        return [self.seconds(dispatches, any_buffer, repeat) / repeat for _ in range(samples)]


def fma_peak(device, timer: Timer, budget_s: float, samples: int) -> list[float]:
    """GFLOP/s of independent vec4 FMA chains (2 flops per lane)."""
    invocations = FMA_WG * 1024
    out = device.create_buffer(invocations * 16, "storage")
    pipe = device.create_pipeline(fma_source(), [True], False)
    group = device.create_bind_group(pipe, [(out, 0, invocations * 16)])
    flops = invocations * FMA_ITERS * FMA_CHAINS * 4 * 2
    return [flops / s / 1e9 for s in timer.measure([(pipe, group, (1024, 1, 1))], out, budget_s, samples)]


def copy_peak(device, timer: Timer, budget_s: float, samples: int, mib: int = 32) -> list[float]:
    """GB/s of a vec4 copy (bytes read + bytes written)."""
    size = mib << 20
    src, dst = device.create_buffer(size, "storage"), device.create_buffer(size, "storage")
    pipe = device.create_pipeline(COPY_WGSL, [False, True], False)
    group = device.create_bind_group(pipe, [(src, 0, size), (dst, 0, size)])
    groups = size // 16 // 256
    return [2 * size / s / 1e9 for s in timer.measure([(pipe, group, (groups, 1, 1))], dst, budget_s, samples)]


def matmul_model(m: int, k: int, n: int):
    """x[m, k] @ W[k, n] with W a constant (weights, as in a model)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = (np.random.default_rng(0).standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)  # f32, not f64
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
                              [numpy_helper.from_array(w, "w")])
    return onnx.helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), w


def webinfer_kernel(m: int, k: int, n: int, timer: Timer, budget_s: float, samples: int, tmp: str):
    """Seconds per run of webinfer's kernels for one MatMul, after checking the result against numpy."""
    import numpy as np

    from webinfer.build import build
    from webinfer.runtime.inference import InferenceSession

    model, w = matmul_model(m, k, n)
    path = os.path.join(tmp, f"mm-{m}x{k}x{n}")
    build(model, path)
    session = InferenceSession(path, device=timer.device)
    x = np.random.default_rng(1).standard_normal((m, k)).astype(np.float32)
    (y,) = session.run(["y"], {"x": x})
    want = x.astype(np.float64) @ w
    if np.abs(y - want).max() > 1e-3 * np.abs(want).max():
        raise RuntimeError(f"matmul {m}x{k}x{n} differs from numpy")
    core = session._core
    env, _ = core.bind_feeds({"x": x})
    plan = core.plan(env)
    any_buffer = next(iter(plan["buffers"].values()))
    return timer.measure(plan["dispatches"], any_buffer, budget_s, samples)


CASES = [("matmul", 512, 512, 512), ("matmul", 1024, 1024, 1024), ("matvec", 1, 576, 1536),
         ("matvec", 1, 576, 49152)]


def run_kernels(job: dict) -> dict:
    """Rows for the kernel table: peaks, then each case's GFLOP/s, GB/s and % of its bounding peak."""
    from webinfer.runtime.native import NativeDevice

    device = NativeDevice()
    timer = Timer(device)
    budget, samples = (0.15, 3) if job.get("quick") else (0.5, 5)
    rows = []

    def add(metric: str, unit: str, values: list[float]) -> None:
        rows.append({"model": "kernels", "metric": metric, "unit": unit, "median": sorted(values)[len(values) // 2],
                     "min": min(values), "max": max(values), "error": None})

    fma, copy = fma_peak(device, timer, budget, samples), copy_peak(device, timer, budget, samples)
    add("peak FMA", "GFLOP/s", fma)
    add("peak copy", "GB/s", copy)
    peak_flops, peak_bw = max(fma), max(copy)
    with tempfile.TemporaryDirectory(prefix="webinfer-kernels-") as tmp:
        for kind, m, k, n in CASES:
            name = f"{kind} {m}x{k}x{n}"
            try:
                secs = webinfer_kernel(m, k, n, timer, budget, samples, tmp)
            except Exception as e:
                rows.append({"model": "kernels", "metric": name, "unit": "", "median": None, "min": None,
                             "max": None, "error": f"{type(e).__name__}: {str(e)[:200]}"})
                continue
            flops, nbytes = 2 * m * k * n, 4 * (m * k + k * n + m * n)
            gflops = [flops / s / 1e9 for s in secs]
            gbs = [nbytes / s / 1e9 for s in secs]
            add(f"{name} GFLOP/s", "GFLOP/s", gflops)
            add(f"{name} GB/s", "GB/s", gbs)
            share = [100 * g / peak_flops for g in gflops] if kind == "matmul" else [100 * b / peak_bw for b in gbs]
            add(f"{name} % of {'FMA' if kind == 'matmul' else 'copy'} peak", "%", share)
    return {"rows": rows, "adapter": device.adapter_name}
