"""webinfer.web: the browser wheel assembled from the installed package, and where Pyodide comes from
(--pyodide DIR, the cache, filled from npm), with one-line errors when neither works."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import stat
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from webinfer import web
from webinfer.errors import WebinferError

ROOT = Path(__file__).resolve().parents[1]
LOCAL_PYODIDE = ROOT / "web" / "node_modules" / "pyodide"


def test_pins_match_the_npm_lock():
    lock = json.loads((ROOT / "web" / "package-lock.json").read_text())["packages"]["node_modules/pyodide"]
    assert (lock["version"], lock["integrity"]) == (web.PYODIDE_VERSION, web.PYODIDE_INTEGRITY)


def test_ort_web_pin_matches_the_npm_lock_and_the_checkout():
    lock = json.loads((ROOT / "web" / "package-lock.json").read_text())["packages"]["node_modules/onnxruntime-web"]
    assert (lock["version"], lock["integrity"]) == (web.ORT_WEB_VERSION, web.ORT_WEB_INTEGRITY)
    dist = ROOT / "web" / "node_modules" / "onnxruntime-web" / "dist"
    for name in web.ORT_WEB_FILES:  # the files the CPU path loads exist in the pinned release
        assert (dist / name).is_file(), name


def test_ort_web_dir_errors(tmp_path, monkeypatch):
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "ort.wasm.min.mjs").write_text("")
    with pytest.raises(WebinferError, match="not onnxruntime-web's dist folder \\(missing ort-wasm-simd-threaded.mjs"):
        web.ort_web_dir(str(tmp_path / "half"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("WEBINFER_ORT_WEB_DIR", raising=False)
    monkeypatch.setattr(web, "_checkout_package", lambda *a: None)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no npm, no checkout: one error naming the ways out
    with pytest.raises(WebinferError, match="onnxruntime-web 1.30.0 is not available \\(npm is not installed\\)"):
        web.ort_web_dir()


def test_browser_wheel_holds_the_runtime_only(tmp_path):
    path = web.browser_wheel(str(tmp_path))
    assert os.path.basename(path) == "webinfer-0.1.0-py3-none-any.whl"
    zf = zipfile.ZipFile(path)
    names = set(zf.namelist())
    for need in ("webinfer/__init__.py", "webinfer/runtime/session.py", "webinfer/page.py", "webinfer/page_cpu.py",
                 "webinfer/runtime/browser.py", "webinfer/llm/generate.py", "webinfer/llm/tokenizer.py",
                 "webinfer/artifact.py", "webinfer/dims.py", "webinfer/dtypes.py", "webinfer/errors.py"):
        assert need in names, need
    assert not [n for n in names if n.startswith(("webinfer/graph/", "webinfer/codegen/", "webinfer/shaders/",
                                                  "webinfer/site/", "webinfer/build.py", "webinfer/cli.py"))]
    # A valid wheel: RECORD lists every other file with its sha256 and size; no dependencies to resolve.
    record = zf.read("webinfer-0.1.0.dist-info/RECORD").decode().splitlines()
    listed = {}
    for line in record:
        name, digest, size = line.rsplit(",", 2)
        listed[name] = (digest, size)
    assert set(listed) == names
    for name, (digest, size) in listed.items():
        if name.endswith("RECORD"):
            continue
        data = zf.read(name)
        want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert (digest, size) == (f"sha256={want}", str(len(data))), name
    assert "Requires-Dist" not in zf.read("webinfer-0.1.0.dist-info/METADATA").decode()
    # The same package gives the same bytes (browsers and Cache Storage can keep it).
    again = web.browser_wheel(str(tmp_path / "again"))
    assert Path(again).read_bytes() == Path(path).read_bytes()


def test_runtime_modules_follow_imports(tmp_path):
    pkg = tmp_path / "pkg"
    for rel, text in {"__init__.py": "", "runtime/__init__.py": "", "runtime/a.py": "from ..util import helper\n",
                      "llm/__init__.py": "", "llm/b.py": "def f():\n    from webinfer.deep import mod\n",
                      "util/__init__.py": "", "util/helper.py": "from . import other\n", "util/other.py": "",
                      "deep/__init__.py": "", "deep/mod.py": "", "build_only.py": "import numpy\n"}.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    assert web.runtime_modules(str(pkg)) == [
        "__init__.py", "deep/__init__.py", "deep/mod.py", "llm/__init__.py", "llm/b.py", "runtime/__init__.py",
        "runtime/a.py", "util/__init__.py", "util/helper.py", "util/other.py"]


@pytest.fixture
def no_checkout(monkeypatch, tmp_path):
    """A home for the cache, and a package that does not sit in a checkout (no web/node_modules to copy)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("WEBINFER_PYODIDE_DIR", raising=False)
    monkeypatch.setattr(web, "_checkout_package", lambda *a: None)
    return tmp_path / "cache" / "webinfer" / "pyodide" / web.PYODIDE_VERSION


def _fake_npm(bin_dir: Path, tarball: Path | None) -> None:
    """An `npm` that writes ``tarball`` where `npm pack` would (or fails like an unreachable registry)."""
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "npm"
    if tarball is None:
        body = 'echo "npm error code ENOTFOUND request to https://registry.npmjs.org failed" >&2; exit 1\n'
    else:
        body = (f'[ "$1" = pack ] && [ "$2" = "pyodide@{web.PYODIDE_VERSION}" ] || exit 9\n'
                f'cp "{tarball}" "$4/pyodide-{web.PYODIDE_VERSION}.tgz"\n')
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def _tarball(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_cache_is_filled_once_from_npm_and_checked(no_checkout, tmp_path, monkeypatch):
    files = {name: f"<{name}>".encode() for name in web.PYODIDE_FILES}
    tgz = _tarball(tmp_path / "p.tgz", files)
    digest = "sha512-" + base64.b64encode(hashlib.sha512(tgz.read_bytes()).digest()).decode()
    _fake_npm(tmp_path / "bin", tgz)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    # A tarball that is not the pinned release is refused and nothing is cached.
    with pytest.raises(WebinferError, match="does not match the pinned sha512"):
        web.pyodide_dir()
    assert not no_checkout.exists()
    monkeypatch.setattr(web, "PYODIDE_INTEGRITY", digest)
    assert web.pyodide_dir() == str(no_checkout)
    assert {p.name: p.read_bytes() for p in no_checkout.iterdir()} == files
    _fake_npm(tmp_path / "bin", None)  # the cache is used from now on: npm is not asked again
    assert web.pyodide_dir() == str(no_checkout)


def test_neither_way_is_one_clear_error(no_checkout, tmp_path, monkeypatch):
    _fake_npm(tmp_path / "bin", None)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    with pytest.raises(WebinferError) as e:
        web.pyodide_dir()
    text = str(e.value)
    assert "\n" not in text and "--pyodide DIR" in text and "npm" in text and "ENOTFOUND" in text
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(WebinferError, match="npm is not installed"):
        web.pyodide_dir()
    with pytest.raises(WebinferError, match="not a Pyodide release folder"):
        web.pyodide_dir(str(tmp_path))


def test_cli_errors_are_one_line(tmp_path):
    from onnx import TensorProto, helper

    model = tmp_path / "m.onnx"
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString())
    (tmp_path / "empty").mkdir()
    cases = [(["--pyodide", str(tmp_path / "empty")], "not a Pyodide release folder (missing pyodide.mjs"),
             (["--pyodide-url", "http://cdn.example/pyodide/"], "expected an https:// folder URL"),
             (["--pyodide", str(tmp_path), "--pyodide-url", "https://cdn.example/p/"], "exclude each other"),
             (["--ort-web", str(tmp_path / "empty")], "not onnxruntime-web's dist folder (missing ort.wasm.min.mjs")]
    for extra, message in cases:
        r = subprocess.run([sys.executable, "-m", "webinfer.cli", "build", str(model), "-o", str(tmp_path / "m.wi"),
                            "--web", str(tmp_path / "site"), *extra], capture_output=True, text=True, cwd=tmp_path)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and message in r.stderr, r.stderr
        assert r.stderr.startswith("webinfer: error:")


def test_pyodide_url_leaves_pyodide_out_of_the_site(tmp_path):
    from onnx import TensorProto, helper

    from webinfer.build import build
    from webinfer.bundle import bundle

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    art = str(tmp_path / "m.wi")
    build(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), art)
    url = f"https://cdn.jsdelivr.net/pyodide/v{web.PYODIDE_VERSION}/full"
    bundle(art, str(tmp_path / "site"), pyodide_url=url)
    assert json.loads((tmp_path / "site" / "site.json").read_text())["pyodide"] == url + "/"
    assert not (tmp_path / "site" / "pyodide").exists()


def test_checkout_seeds_the_cache(monkeypatch, tmp_path):
    """make setup's web/node_modules/pyodide fills the cache without npm."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("WEBINFER_PYODIDE_DIR", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no npm: the checkout's copy is enough
    got = Path(web.pyodide_dir())
    assert got == tmp_path / "cache" / "webinfer" / "pyodide" / web.PYODIDE_VERSION
    assert (got / "pyodide.asm.wasm").read_bytes() == (LOCAL_PYODIDE / "pyodide.asm.wasm").read_bytes()
