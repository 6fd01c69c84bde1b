"""As a new user: the wheel built from this checkout, installed into a fresh virtualenv outside it, turns an
ONNX model into a web page (`webinfer build tiny.onnx --web site/`) with Pyodide from a prepared local cache
and no network, and the page gives the same outputs in Chromium as the wheel's native `webinfer run`."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper, save

from webinfer import web
from webinfer.web import PYODIDE_FILES, PYODIDE_VERSION, pyodide_dir

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]


def _tiny_model(path: Path) -> None:
    rng = np.random.default_rng(5)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Tanh", ["m"], ["y"])], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        [numpy_helper.from_array(rng.standard_normal((5, 4)).astype(np.float32), "w")])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))


def _clean_env() -> dict:
    """The environment without anything that points Python at the checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "WEBINFER_PYODIDE_DIR", "VIRTUAL_ENV")}


def _fresh_venv(tmp: Path) -> Path:
    """A venv holding only the wheel of this checkout; the heavy build dependencies (numpy, onnx, wgpu ...)
    are read from the test's own environment through a .pth line, so nothing is downloaded."""
    src = tmp / "src"  # build from a copy: no build/ or egg-info written into the checkout
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copyfile(ROOT / name, src / name)
    shutil.copytree(ROOT / "webinfer", src / "webinfer", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp / "dist")], check=True, cwd=tmp)
    (wheel,) = glob.glob(str(tmp / "dist" / "webinfer-*.whl"))
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--no-deps", "--no-index", wheel], check=True, env=_clean_env())
    site = Path(subprocess.check_output([str(venv / "bin" / "python"), "-c",
                                         "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip())
    # A plain path line (not `import site; site.addsitedir`): the dependencies' own .pth files, among them
    # the checkout's editable install of webinfer, stay inactive.
    (site / "zz_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


def test_wheel_outside_checkout_builds_a_page_that_matches_native(page, tmp_path):
    from webinfer.serve import serve_in_thread

    work = tmp_path / "user"  # the user's folder, outside the checkout
    work.mkdir()
    venv = _fresh_venv(tmp_path)
    env = _clean_env()
    env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
    where = subprocess.check_output([str(venv / "bin" / "python"), "-c", "import webinfer; print(webinfer.__file__)"],
                                    text=True, env=env, cwd=work).strip()
    assert where.startswith(str(venv)), f"the venv imported webinfer from {where}, not from the wheel"
    # The prepared cache: Pyodide's release files, and onnxruntime-web's for the CPU path (on by default with
    # --web), where webinfer looks for them ($XDG_CACHE_HOME).
    for pkg, version, files, src in (("pyodide", PYODIDE_VERSION, PYODIDE_FILES, pyodide_dir()),
                                     ("onnxruntime-web", web.ORT_WEB_VERSION, web.ORT_WEB_FILES, web.ort_web_dir())):
        cache = tmp_path / "cache" / "webinfer" / pkg / version
        cache.mkdir(parents=True)
        for name in files:
            os.symlink(os.path.join(src, name), cache / name)
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    _tiny_model(work / "tiny.onnx")
    # No network: a fresh network namespace has only a down loopback (unshare -rn, available to root here).
    offline = ["unshare", "-rn"] if subprocess.run(["unshare", "-rn", "true"]).returncode == 0 else []
    r = subprocess.run([*offline, "webinfer", "build", "tiny.onnx", "--web", "site/"], capture_output=True,
                       text=True, env=env, cwd=work)
    assert r.returncode == 0, r.stderr
    assert offline, "unshare -rn is needed to show the build used no network"
    assert "CPU path: assets/cpu-model.onnx" in r.stdout and (work / "site" / "ort" / web.ORT_WEB_FILES[0]).is_file()
    x = np.ones((1, 5), np.float32)
    np.save(work / "x.npy", x)
    r = subprocess.run(["webinfer", "run", "tiny.wi", "--input", "x=x.npy", "--output", "out.npz"],
                       capture_output=True, text=True, env=env, cwd=work)
    assert r.returncode == 0, r.stderr
    native = np.load(work / "out.npz")["y"]
    reference = np.tanh(x @ numpy_helper.to_array(__import__("onnx").load(str(work / "tiny.onnx")).graph.initializer[0]))
    np.testing.assert_allclose(native, reference, rtol=1e-5, atol=1e-6)

    server, url = serve_in_thread(str(work / "site"))
    requests = []
    page.on("request", lambda req: requests.append(req.url))
    try:
        page.goto(url + "model/")
        page.wait_for_selector("#result[data-done]", state="attached", timeout=180_000)
        assert page.locator("#result").get_attribute("data-error") is None, page.locator("#status").inner_text()
        got = json.loads(page.locator("#result").get_attribute("data-outputs"))
    finally:
        server.shutdown()
        server.server_close()
    assert got["y"]["shape"] == [1, 4]
    np.testing.assert_allclose(got["y"]["head"], native.reshape(-1), rtol=1e-5, atol=1e-6)
    assert {urlparse(u).hostname for u in requests} == {"127.0.0.1"}
