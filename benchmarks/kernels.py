"""Kernel microbenchmarks on one adapter: its measured peak (an FMA-throughput kernel, a copy kernel) and
webinfer's own matmul / matrix-vector kernels as a share of that peak.

Everything goes through webinfer's ``Device`` interface, so the times are of the same submits a session
makes: K dispatches in one command buffer, then a 16-byte readback to wait for the GPU (K is chosen so the
wait and per-submit costs are a few percent). webinfer's kernels come from building one-op ONNX models.
Each figure is also given per CPU-second of this process (``cpu`` rows): a software GPU (lavapipe) runs the
kernels on this process's threads, so that share holds on a machine others are loading too.

    python -m benchmarks.kernels [--quick]
"""

from __future__ import annotations

import os
import sys
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

    def seconds(self, dispatches: list, any_buffer, repeat: int) -> tuple[float, float]:
        """(wall seconds, CPU seconds of this process) for ``repeat`` repetitions."""
        from webinfer.runtime.session import run_sync

        t0, c0 = time.perf_counter(), time.process_time()
        self.device.submit(dispatches * repeat, [(any_buffer, 0, self.readback, 0, 16)])
        run_sync(self.device.read(self.readback, 16))
        return time.perf_counter() - t0, time.process_time() - c0

    def measure(self, dispatches: list, any_buffer, budget_s: float, samples: int) -> tuple[list, list]:
        """(wall, CPU) seconds per repetition, ``samples`` times each, repeats sized to ``budget_s`` a sample."""
        self.seconds(dispatches, any_buffer, 1)  # compile in the driver
        one = self.seconds(dispatches, any_buffer, 1)[0]
        repeat = max(1, min(1000, int(budget_s / max(one, 1e-6))))
        runs = [self.seconds(dispatches, any_buffer, repeat) for _ in range(samples)]
        return [w / repeat for w, _ in runs], [c / repeat for _, c in runs]


def fma_peak(device, timer: Timer, budget_s: float, samples: int) -> tuple[list, list]:
    """GFLOP/s (per wall second, per CPU second) of independent vec4 FMA chains (2 flops per lane)."""
    invocations = FMA_WG * 1024
    out = device.create_buffer(invocations * 16, "storage")
    pipe = device.create_pipeline(fma_source(), [True], False)
    group = device.create_bind_group(pipe, [(out, 0, invocations * 16)])
    flops = invocations * FMA_ITERS * FMA_CHAINS * 4 * 2
    return rates(flops / 1e9, timer.measure([(pipe, group, (1024, 1, 1))], out, budget_s, samples))


def rates(amount: float, secs: tuple[list, list]) -> tuple[list, list]:
    return [amount / s for s in secs[0]], [amount / s for s in secs[1]]


def copy_peak(device, timer: Timer, budget_s: float, samples: int, mib: int = 32) -> tuple[list, list]:
    """GB/s (per wall second, per CPU second) of a vec4 copy (bytes read + bytes written)."""
    size = mib << 20
    src, dst = device.create_buffer(size, "storage"), device.create_buffer(size, "storage")
    pipe = device.create_pipeline(COPY_WGSL, [False, True], False)
    group = device.create_bind_group(pipe, [(src, 0, size), (dst, 0, size)])
    groups = size // 16 // 256
    return rates(2 * size / 1e9, timer.measure([(pipe, group, (groups, 1, 1))], dst, budget_s, samples))


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


def webinfer_kernel(m: int, k: int, n: int, timer: Timer, budget_s: float, samples: int, tmp: str,
                    quantize: str | None = None, target: str = "portable"):
    """(wall, CPU) seconds per run of webinfer's kernels for one MatMul (its weight packed as ``quantize``;
    the program the session chooses of a ``target`` build), after checking the result against numpy."""
    import numpy as np

    from webinfer.build import build
    from webinfer.runtime.inference import InferenceSession

    model, w = matmul_model(m, k, n)
    path = os.path.join(tmp, f"mm-{m}x{k}x{n}-{quantize}-{target}")
    build(model, path, quantize=quantize, target=target)
    session = InferenceSession(path, device=timer.device)
    x = np.random.default_rng(1).standard_normal((m, k)).astype(np.float32)
    (y,) = session.run(["y"], {"x": x})
    want = x.astype(np.float64) @ w
    bound = {None: 1e-3, "int8": 3e-2, "int4": 0.25}[quantize]  # the packed weights' own error, not garbage
    if np.abs(y - want).max() > bound * np.abs(want).max():
        raise RuntimeError(f"matmul {m}x{k}x{n} differs from numpy")
    core = session._core
    env, _ = core.bind_feeds({"x": x})
    plan = core.plan(env)
    any_buffer = next(b for tid, b in plan.buffers.items() if tid not in core.textures)  # a buffer copies
    return timer.measure(plan.dispatches, any_buffer, budget_s, samples)


# (kind, m, k, n, weight format, target). int4 GEMV shares count weight bytes (words + block params) against
# the copy peak; software-q8 is the opt-in software class whose int4 GEMV takes int8 activations.
CASES = [("matmul", 512, 512, 512, None, "portable"), ("matmul", 1024, 1024, 1024, None, "portable"),
         ("matvec", 1, 576, 1536, None, "portable"), ("matvec", 1, 576, 49152, None, "portable"),
         ("int4 gemv", 1, 576, 49152, "int4", "portable"), ("int4 gemv", 1, 576, 49152, "int4", "software-q8")]


def moved_bytes(m: int, k: int, n: int, quantize: str | None) -> int:
    if quantize == "int4":
        return k * n // 2 + (k // 32) * n * 8
    return 4 * (m * k + k * n + m * n)


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
    for clock, i in (("", 0), (" (cpu)", 1)):
        add(f"peak FMA{clock}", f"GFLOP/{'cpu-' if i else ''}s", fma[i])
        add(f"peak copy{clock}", f"GB/{'cpu-' if i else ''}s", copy[i])
    with tempfile.TemporaryDirectory(prefix="webinfer-kernels-") as tmp:
        for kind, m, k, n, quantize, target in CASES:
            name = f"{kind} {m}x{k}x{n}" + (f" ({target})" if target != "portable" else "")
            try:
                secs = webinfer_kernel(m, k, n, timer, budget, samples, tmp, quantize, target)
            except Exception as e:
                rows.append({"model": "kernels", "metric": name, "unit": "", "median": None, "min": None,
                             "max": None, "error": f"{type(e).__name__}: {str(e)[:200]}"})
                continue
            bound_by_flops = kind == "matmul"
            for clock, i in (("", 0), (" (cpu)", 1)):
                gflops, gbs = rates(2 * m * k * n / 1e9, secs)[i], rates(moved_bytes(m, k, n, quantize) / 1e9, secs)[i]
                if not clock:
                    add(f"{name} GFLOP/s", "GFLOP/s", gflops)
                    add(f"{name} GB/s", "GB/s", gbs)
                peak = max(fma[i]) if bound_by_flops else max(copy[i])
                share = [100 * v / peak for v in (gflops if bound_by_flops else gbs)]
                add(f"{name} % of {'FMA' if bound_by_flops else 'copy'} peak{clock}", "%", share)
    return {"rows": rows, "adapter": device.adapter_name}


if __name__ == "__main__":
    result = run_kernels({"quick": "--quick" in sys.argv})
    print(result["adapter"])
    for r in result["rows"]:
        figures = f"{r['median']:8.2f} {r['unit']:9s} (min {r['min']:.2f}, max {r['max']:.2f})" if r["median"] else r["error"]
        print(f"{r['metric']:55s} {figures}")
