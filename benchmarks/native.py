"""Native engines, each run in its own worker process: ``python -m benchmarks.native ENGINE JOBS OUT``.

A process per engine keeps one engine's crash or Vulkan driver (``VK_ICD_FILENAMES``) away from the
others. onnxruntime's WebGPU plugin needs a DRM card in /sys before it offers a GPU device: on a machine
without one the worker runs under ``unshare -m`` and mounts a fake card0 on a private /sys/class.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import traceback

from .runner import Engine, run_job

SWIFTSHADER_ICD = "/usr/lib/chromium/vk_swiftshader_icd.json"
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE_VENDOR = "0x1af4"  # ORT reads a 16-bit PCI vendor id; virtio's is harmless
_EP_REGISTERED = False


class WebinferNative(Engine):
    def __init__(self, artifact: str, kernel_class: str | None = None):
        from webinfer.runtime.inference import InferenceSession

        # (a baseline checkout's InferenceSession may predate kernel classes: pass one only when forced)
        self.session = InferenceSession(artifact, **({"kernel_class": kernel_class} if kernel_class else {}))
        self.adapter = self.session.device.adapter_name
        choice = getattr(self.session, "choice", None)
        if choice is not None:
            self.adapter += f", {choice.kernel_class} class"

    def tensor(self, dtype, shape, data):
        from webinfer.runtime.tensor import HostTensor

        return HostTensor(dtype, shape, data)

    def raw(self, value) -> bytes:
        return value.astype("float32").tobytes() if hasattr(value, "astype") else value.data

    async def run(self, names, feeds):
        return await self.session.run_async(names, feeds)


class OrtEngine(Engine):
    """onnxruntime with the CPU provider, or the WebGPU plugin provider (refusing a silent CPU fallback)."""

    def __init__(self, onnx_path: str, provider: str):
        import onnxruntime as ort

        options = ort.SessionOptions()
        if provider == "webgpu":
            import onnxruntime_ep_webgpu as ep

            global _EP_REGISTERED
            if not _EP_REGISTERED:  # once per process: ORT refuses a second registration
                ort.register_execution_provider_library("webgpu", ep.get_library_path())
                _EP_REGISTERED = True
            devices = [d for d in ort.get_ep_devices() if d.ep_name == ep.get_ep_name()]
            if not devices:
                raise RuntimeError("onnxruntime offers no WebGPU device (no DRM card visible)")
            options.add_provider_for_devices(devices, {})
            self.session = ort.InferenceSession(onnx_path, options)
            if self.session.get_providers()[0] != ep.get_ep_name():
                raise RuntimeError(f"fell back to {self.session.get_providers()}")
            self.adapter = "SwiftShader" if os.environ.get("VK_ICD_FILENAMES") == SWIFTSHADER_ICD else "Vulkan"
        elif provider == "cuda":
            self.session = ort.InferenceSession(onnx_path, options, providers=["CUDAExecutionProvider"])
            if self.session.get_providers()[0] != "CUDAExecutionProvider":
                raise RuntimeError(f"fell back to {self.session.get_providers()}")
            self.adapter = "CUDA"
        else:
            self.session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
            self.adapter = "CPU"

    def tensor(self, dtype, shape, data):
        import numpy as np

        return np.frombuffer(data, dtype=dtype).reshape(shape)

    def raw(self, value) -> bytes:
        import numpy as np

        return np.ascontiguousarray(value, dtype=np.float32).tobytes()

    async def run(self, names, feeds):
        return self.session.run(names, feeds)


def forced_class(engine: str) -> str | None:
    """``webinfer-software`` / ``webinfer-gpu``: the default adapter running that class's program."""
    base = engine.split("@")[0]
    return base[len("webinfer-"):] if base in ("webinfer-software", "webinfer-gpu") else None


def make_engine(name: str, job: dict):
    kclass = forced_class(name)
    if name.startswith("webinfer") and job.get("llm"):
        from webinfer.llm.generate import Generator

        return Generator.load(job["artifact"], **({"kernel_class": kclass} if kclass else {}))
    if name.startswith("webinfer"):
        return WebinferNative(job["artifact"], kclass)
    return OrtEngine(job["onnx"], {"ort-webgpu": "webgpu", "ort-cuda": "cuda"}.get(name, "cpu"))


def _import_engine(name: str) -> None:
    try:
        if name.startswith("webinfer"):
            import webinfer.llm.generate  # noqa: F401
            import webinfer.runtime.inference  # noqa: F401
        else:
            import onnxruntime  # noqa: F401
    except Exception:  # the job reports it
        pass


def baseline_artifact(engine: str, job: dict) -> str:
    """The job's model built by the baseline checkout's own compiler (this worker imports webinfer from it),
    cached per commit: ``<bench artifacts>/baseline-<sha>/<model>``."""
    from webinfer.build import build

    folder = os.path.join(job["baseline_cache"], job["model"].replace(" ", "-").lower())
    stamp = os.path.join(folder, ".built")
    if not os.path.isfile(stamp):
        build(job["onnx"], folder, **({"quantize": job["quantize"]} if job.get("quantize") else {}))
        open(stamp, "w").close()
    return folder


def prebuild_baseline(engine: str, jobs: list[dict], root: str, log) -> None:
    """Build the jobs' models with the baseline checkout's compiler (its worker, ``--build-only``) before any
    timed pass. Built inside a timed job, a build longer than the job's limit was killed every pass (and a
    pass that built one counted its build against the limit), so those models never got a baseline cell."""
    with tempfile.TemporaryDirectory(prefix="webinfer-baseline-build-") as tmp:
        jobs_path, out_path = os.path.join(tmp, "jobs.json"), os.path.join(tmp, "out.json")
        with open(jobs_path, "w") as f:
            json.dump(jobs, f)
        cmd, env = worker_command(engine, jobs_path, out_path, os.path.join(root, "src"))
        proc = subprocess.run(cmd + ["--build-only"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
        try:
            with open(out_path) as f:
                results = json.load(f)
        except (OSError, ValueError):
            results = []
    for r in results:
        log(f"{engine}: {r['model']}: " + (f"build failed: {r['error']}" if "error" in r else
                                            f"artifact ready in {r['seconds']:.1f} s (built, or cached)"))
    if proc.returncode != 0:
        log(f"{engine}: the build worker failed: {(proc.stderr or '').strip().splitlines()[-1:] or 'no output'}")


def build_only(engine_name: str, jobs: list[dict], out_path: str) -> None:
    """``--build-only``: each job's baseline artifact (``baseline_artifact``), timed; nothing is run."""
    results = []
    for job in jobs:
        t0 = time.perf_counter()
        try:
            baseline_artifact(engine_name, job)
            results.append({"model": job["model"], "seconds": time.perf_counter() - t0})
        except Exception as e:
            traceback.print_exc()
            results.append({"model": job["model"], "error": f"{type(e).__name__}: {str(e)[:200]}"})
    with open(out_path, "w") as f:
        json.dump(results, f)


def run_jobs(engine_name: str, jobs: list[dict], out_path: str) -> None:
    """Each job's result, or its error as one line; a failing model never stops the next. The results so far
    are rewritten after each job, so a worker killed on its time limit still reports what it finished.
    Load time: making the engine (session, weights) in this running worker; the imports come first, so
    every model's load counts alike."""
    from webinfer.runtime.session import run_sync

    _import_engine(engine_name)

    results = []
    for job in jobs:
        try:
            if job.get("kernels"):
                from .kernels import run_kernels

                result = run_kernels(job)
            else:
                if "@" in engine_name:  # the baseline's build is not part of its load time
                    job = dict(job, artifact=baseline_artifact(engine_name, job))
                t0 = time.perf_counter()
                engine = make_engine(engine_name.split("@")[0], job)
                result = run_sync(run_job(engine, job, (time.perf_counter() - t0) * 1e3))
        except Exception as e:  # reported in the table, with the traceback on stderr
            traceback.print_exc()
            result = {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]}
        results.append({"model": job["model"], **result})
        with open(out_path + ".tmp", "w") as f:
            json.dump(results, f)
        os.replace(out_path + ".tmp", out_path)


def _fake_drm_card() -> None:
    """Inside a private mount namespace: a tmpfs over /sys/class holding drm/card0/device/{vendor,device}."""
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", "/sys/class"], check=True)
    card = "/sys/class/drm/card0/device"
    os.makedirs(card)
    for name, value in (("vendor", FAKE_VENDOR), ("device", "0x1050")):
        with open(os.path.join(card, name), "w") as f:
            f.write(value + "\n")


def has_drm_card() -> bool:
    return os.path.isfile("/sys/class/drm/card0/device/vendor")


def worker_command(engine: str, jobs_path: str, out_path: str, webinfer_from: str | None = None
                   ) -> tuple[list[str], dict]:
    """The command line and environment of one engine's worker; ``webinfer_from``: a checkout whose webinfer
    package the worker imports instead of this one (a ``--baseline`` engine)."""
    env = {**os.environ, "PYTHONPATH": REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="webinfer-xdg-"))
    cmd = [sys.executable, "-m", "benchmarks.native", engine, jobs_path, out_path]
    if webinfer_from:
        cmd += ["--webinfer-from", webinfer_from]
    if engine.split("@")[0].endswith("swiftshader"):
        env["VK_ICD_FILENAMES"] = SWIFTSHADER_ICD
    if engine == "ort-webgpu" and not has_drm_card():
        # Dawn rejects lavapipe 22.3 (missing dynamic-indexing features): SwiftShader it is, unless a Vulkan
        # driver was named (scripts/bench_gpu.sh names the NVIDIA one).
        if "VK_ICD_FILENAMES" not in os.environ:
            env["VK_ICD_FILENAMES"] = SWIFTSHADER_ICD
        unshare = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-rm"]
        cmd = unshare + cmd + ["--fake-drm"]
    return cmd, env


def main(argv: list[str]) -> int:
    engine, jobs_path, out_path = argv[:3]
    if "--fake-drm" in argv:
        _fake_drm_card()
    if "--webinfer-from" in argv:  # before anything imports webinfer: the baseline checkout's package wins
        sys.path.insert(0, argv[argv.index("--webinfer-from") + 1])
    with open(jobs_path) as f:
        jobs = json.load(f)
    (build_only if "--build-only" in argv else run_jobs)(engine, jobs, out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
