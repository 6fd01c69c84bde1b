"""Assemble a static site that runs an artifact in the browser: Pyodide + a webinfer wheel + the artifact.

Layout of the site (everything served from one origin, e.g. ``webinfer serve SITE``)::

    index.html, boot.mjs, main.py   from web/smoke/ (the page, its JS boot, the Python it runs)
    pyodide/                        Pyodide's runtime files from web/node_modules/pyodide (npm, never a CDN)
    wheels/webinfer-*.whl           a pure-Python wheel of this checkout (setuptools, the standard backend)
    artifact/                       a copy of the artifact directory
    inputs.json                     the feeds: name -> {dtype, shape, b64 of the raw little-endian bytes}
    site.json                       where the page finds the above

Build-time module: numpy is allowed here (not in the runtime).
"""

from __future__ import annotations

import argparse
import base64
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WEB_DIR = os.path.join(REPO_ROOT, "web")
PYODIDE_FILES = ("pyodide.mjs", "pyodide.js", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip",
                 "pyodide-lock.json")


def pyodide_dir() -> str:
    """Where npm put Pyodide (``WEBINFER_PYODIDE_DIR`` overrides); a clear error when set-up has not run."""
    path = os.environ.get("WEBINFER_PYODIDE_DIR") or os.path.join(WEB_DIR, "node_modules", "pyodide")
    if not os.path.isfile(os.path.join(path, "pyodide.mjs")):
        raise FileNotFoundError(f"{path}: Pyodide is not installed; run `make setup` "
                                "(npm ci --prefix web) or set WEBINFER_PYODIDE_DIR")
    return path


def build_wheel(out_dir: str) -> str:
    """``pip wheel . --no-deps`` of this checkout into ``out_dir``; returns the wheel's path."""
    if not os.path.isfile(os.path.join(REPO_ROOT, "pyproject.toml")):
        raise FileNotFoundError(f"{REPO_ROOT}: not a webinfer source checkout (no pyproject.toml)")
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="webinfer-wheel-") as tmp:
        # --no-build-isolation: use the venv's setuptools, no index needed; the temp dir keeps
        # concurrent builds from sharing an output folder.
        subprocess.run([sys.executable, "-m", "pip", "wheel", REPO_ROOT, "--no-deps", "--no-build-isolation",
                        "-q", "-w", tmp], check=True, stdout=subprocess.DEVNULL)
        (wheel,) = glob.glob(os.path.join(tmp, "webinfer-*.whl"))
        dest = os.path.join(out_dir, os.path.basename(wheel))
        shutil.copyfile(wheel, dest)
    return dest


def encode_inputs(inputs: dict) -> dict:
    """numpy arrays -> the JSON form the page decodes into HostTensors."""
    import numpy as np

    out = {}
    for name, value in inputs.items():
        a = np.asarray(value, order="C")
        out[name] = {"dtype": str(a.dtype), "shape": list(a.shape),
                     "b64": base64.b64encode(a.astype(a.dtype.newbyteorder("<")).tobytes()).decode()}
    return out


def random_inputs(artifact_dir: str, seed: int = 0) -> dict:
    """Inputs for an artifact when none are given: symbolic dims set to 1, floats in [0, 1), ints 0."""
    import numpy as np

    with open(os.path.join(artifact_dir, "manifest.json")) as f:
        manifest = json.load(f)
    rng = np.random.default_rng(seed)
    feeds = {}
    for io in manifest["inputs"]:
        t = manifest["tensors"][io["tensor"]]
        shape = [d if isinstance(d, int) else 1 for d in t["shape"]]
        dtype = np.dtype(t["dtype"])
        feeds[io["name"]] = (rng.random(shape).astype(dtype) if dtype.kind == "f" else np.zeros(shape, dtype))
    return feeds


def build_smoke_site(artifact_dir: str, out_dir: str, inputs: dict | None = None,
                     wheel: str | None = None) -> str:
    """Write the site for ``artifact_dir`` into ``out_dir`` (replacing its artifact); returns ``out_dir``.

    ``inputs``: name -> numpy array (default: ``random_inputs``); ``wheel``: a prebuilt webinfer wheel to
    reuse (building one takes a few seconds).
    """
    if not os.path.isfile(os.path.join(artifact_dir, "manifest.json")):
        raise FileNotFoundError(f"{artifact_dir}: not a webinfer artifact (no manifest.json)")
    os.makedirs(out_dir, exist_ok=True)
    for name in ("index.html", "boot.mjs", "main.py"):
        shutil.copyfile(os.path.join(WEB_DIR, "smoke", name), os.path.join(out_dir, name))
    pyo_src, pyo_dst = pyodide_dir(), os.path.join(out_dir, "pyodide")
    os.makedirs(pyo_dst, exist_ok=True)
    for name in PYODIDE_FILES:
        src, dst = os.path.join(pyo_src, name), os.path.join(pyo_dst, name)
        if os.path.isfile(src) and not _same_file(src, dst):
            shutil.copyfile(src, dst)
    wheels = os.path.join(out_dir, "wheels")
    shutil.rmtree(wheels, ignore_errors=True)
    if wheel is None:
        wheel = build_wheel(wheels)
    else:
        os.makedirs(wheels, exist_ok=True)
        wheel = shutil.copy(wheel, wheels)
    art = os.path.join(out_dir, "artifact")
    shutil.rmtree(art, ignore_errors=True)
    shutil.copytree(artifact_dir, art)
    if inputs is None:
        inputs = random_inputs(artifact_dir)
    with open(os.path.join(out_dir, "inputs.json"), "w") as f:
        json.dump(encode_inputs(inputs), f)
    with open(os.path.join(out_dir, "site.json"), "w") as f:
        json.dump({"wheel": f"wheels/{os.path.basename(wheel)}", "artifact": "artifact/",
                   "inputs": "inputs.json"}, f, indent=1)
    return out_dir


def _same_file(src: str, dst: str) -> bool:
    try:
        a, b = os.stat(src), os.stat(dst)
    except OSError:
        return False
    return a.st_size == b.st_size and int(a.st_mtime) <= int(b.st_mtime)


def main(argv: list[str] | None = None) -> None:
    """``python -m webinfer.web ARTIFACT SITE [--input name=file.npy ...]``."""
    import numpy as np

    p = argparse.ArgumentParser(prog="python -m webinfer.web", description=main.__doc__)
    p.add_argument("artifact")
    p.add_argument("site")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    args = p.parse_args(argv)
    inputs = {}
    for item in args.input:
        name, _, path = item.partition("=")
        inputs[name] = np.load(path)
    build_smoke_site(args.artifact, args.site, inputs or None)
    print(f"site written to {args.site}; serve it with: webinfer serve {args.site}")


if __name__ == "__main__":
    main()
