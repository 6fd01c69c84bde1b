"""What a web bundle needs besides the artifact: Pyodide's runtime files, a browser wheel of webinfer, and for
an artifact carrying a CPU model (``build --cpu``), onnxruntime-web's wasm backend.

Both come from the installed package, so ``webinfer build --web`` / ``webinfer bundle`` work from a wheel
installed anywhere, not only from a source checkout:

- The browser wheel is assembled from the installed ``webinfer`` package: only the modules the runtime
  imports (followed from ``runtime/`` and ``llm/``), standard-library Python, no Requires-Dist, so
  Pyodide installs it offline.
- Pyodide (the pinned npm release, no package wheels needed) comes from, in order: ``--pyodide DIR``;
  ``WEBINFER_PYODIDE_DIR``; the cache ``~/.cache/webinfer/pyodide/<version>`` (``$XDG_CACHE_HOME``),
  filled once from a source checkout's ``web/node_modules/pyodide`` of that version or else with
  ``npm pack pyodide@<version>`` (the tarball's sha512 checked against the pin). Neither possible: one
  clear error naming both ways.
- onnxruntime-web (the CPU path: its wasm build only, ``ORT_WEB_FILES``) is found the same way: ``--ort-web
  DIR``; ``WEBINFER_ORT_WEB_DIR``; the cache ``~/.cache/webinfer/onnxruntime-web/<version>``, filled from a
  checkout's ``web/node_modules/onnxruntime-web/dist`` or ``npm pack`` (sha512 checked).

Build-time module (standard library only, but never loaded by the browser).
"""

from __future__ import annotations

import ast
import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import zipfile

from . import __version__
from .errors import WebinferError

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# The Pyodide release pages load, and npm's integrity for its tarball (web/package-lock.json pins the same).
PYODIDE_VERSION = "314.0.7"
PYODIDE_INTEGRITY = ("sha512-0YvXxEhfEdpLfb/XkM2BFAeMROq0iMUX2bzzH9pOttyMcWkwq+HbE5uyuGD82LN7y2q+SNvi/6V5JEsOlD2R1A==")
PYODIDE_FILES = ("pyodide.mjs", "pyodide.js", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip",
                 "pyodide-lock.json")
_REQUIRED = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
# onnxruntime-web for the CPU path: the wasm-only ES module build and the SIMD+threads binary it loads (it
# runs single-threaded where the page is not cross-origin isolated). web/package-lock.json pins the same.
ORT_WEB_VERSION = "1.30.0"
ORT_WEB_INTEGRITY = ("sha512-q0y+JrrtukXSzsBWEMccVfqX25LRmosXHF+CaRJmg8pZClzcV7svNc4rKY3jL02Vb7QmRMDs1SigqR4CXAfKYQ==")
ORT_WEB_FILES = ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
# Every module the browser may import is reached from these (plus the package's __init__): folders, and the page's
# own module.
RUNTIME_ROOTS = ("runtime", "llm", "page.py", "page_cpu.py")


# -- Pyodide ---------------------------------------------------------------------------------------------
def cache_root() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "webinfer")


def pyodide_dir(pyodide: str | None = None) -> str:
    """A folder holding Pyodide's runtime files: ``pyodide`` if given, else ``WEBINFER_PYODIDE_DIR``, else
    the cache (filled on first use). Raises WebinferError with both ways to fix it when none works."""
    return _npm_files_dir(
        "pyodide", pyodide or os.environ.get("WEBINFER_PYODIDE_DIR"), "--pyodide", "not a Pyodide release folder",
        f"Pyodide {PYODIDE_VERSION}", "pass --pyodide DIR (a folder with pyodide.mjs, e.g. node_modules/pyodide after "
        f"`npm install pyodide@{PYODIDE_VERSION}`) or let webinfer fill {{cached}} once with npm (needs `npm` and "
        "the npm registry)")


def ort_web_dir(ort_web: str | None = None) -> str:
    """A folder holding onnxruntime-web's ORT_WEB_FILES: ``ort_web``, else ``WEBINFER_ORT_WEB_DIR``, else the
    cache (filled on first use). Raises WebinferError with both ways to fix it when none works."""
    return _npm_files_dir(
        "onnxruntime-web", ort_web or os.environ.get("WEBINFER_ORT_WEB_DIR"), "--ort-web",
        "not onnxruntime-web's dist folder", f"onnxruntime-web {ORT_WEB_VERSION}", "pass --ort-web DIR (its dist "
        f"folder, e.g. node_modules/onnxruntime-web/dist after `npm install onnxruntime-web@{ORT_WEB_VERSION}`), "
        "let webinfer fill {cached} once with npm, or build without --cpu")


def _npm_files_dir(name: str, explicit: str | None, flag: str, not_it: str, what: str, fix: str) -> str:
    """The folder of an npm package's files a site serves: ``explicit`` (checked), else the cache, filled once
    from a source checkout's web/node_modules or npm (_fill_cache); one line saying how to fix it otherwise."""
    package = _package(name)
    version, required = package[1], package[4]
    if explicit:
        missing = [n for n in required if not os.path.isfile(os.path.join(explicit, n))]
        if missing:
            raise WebinferError(f"{flag} {explicit}: {not_it} (missing {', '.join(missing)})")
        return explicit
    cached = os.path.join(cache_root(), name, version)
    if all(os.path.isfile(os.path.join(cached, n)) for n in required):
        return cached
    why = _fill_cache(cached, _checkout_package(name, version, package[5]), package)
    if why is None:
        return cached
    raise WebinferError(f"{what} is not available ({why}): {fix.format(cached=cached)}")


def _checkout_package(name: str, version: str, folder: str) -> str | None:
    """A source checkout's ``web/node_modules/<name>`` (its ``folder`` inside the tarball: ``package/dist`` is
    ``dist``) of the pinned version, if this package sits in one."""
    path = os.path.join(os.path.dirname(PACKAGE_DIR), "web", "node_modules", name)
    try:
        with open(os.path.join(path, "package.json")) as f:
            found = json.load(f).get("version")
    except (OSError, ValueError):
        return None
    return os.path.join(path, *folder.split("/")[1:]) if found == version else None


def _package(name: str) -> tuple:
    """(npm package, version, integrity, files, required files, folder inside the tarball), read when used."""
    if name == "pyodide":
        return ("pyodide", PYODIDE_VERSION, PYODIDE_INTEGRITY, PYODIDE_FILES, _REQUIRED, "package")
    return ("onnxruntime-web", ORT_WEB_VERSION, ORT_WEB_INTEGRITY, ORT_WEB_FILES, ORT_WEB_FILES, "package/dist")


def copy_ort_web(src: str, site_dir: str) -> None:
    """onnxruntime-web's wasm files into ``site_dir``/ort (unchanged files are left alone)."""
    dst_dir = os.path.join(site_dir, "ort")
    os.makedirs(dst_dir, exist_ok=True)
    for name in ORT_WEB_FILES:
        src_file, dst = os.path.join(src, name), os.path.join(dst_dir, name)
        if not _same_file(src_file, dst):
            shutil.copyfile(src_file, dst)


def _fill_cache(dest: str, local: str | None, pkg: tuple) -> str | None:
    """Fill ``dest`` with a package's files (from a checkout's folder ``local``, else npm); None on success,
    else why not."""
    parent = os.path.dirname(dest)
    os.makedirs(parent, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fill-", dir=parent) as tmp:
        staged = os.path.join(tmp, "pyodide")
        os.makedirs(staged)
        if local is not None:
            for name in pkg[3]:
                if os.path.isfile(os.path.join(local, name)):
                    shutil.copyfile(os.path.join(local, name), os.path.join(staged, name))
        else:
            why = _npm_pack_into(staged, tmp, pkg)
            if why is not None:
                return why
        try:
            os.rename(staged, dest)  # atomic: concurrent fillers leave one complete copy
        except OSError:
            if not os.path.isfile(os.path.join(dest, pkg[4][0])):
                raise
    return None


def _npm_pack_into(staged: str, tmp: str, pkg: tuple) -> str | None:
    name, version, integrity, files, required, folder = pkg
    spec = f"{name}@{version}"
    try:
        r = subprocess.run(["npm", "pack", spec, "--pack-destination", tmp, "--json", "--loglevel=error"],
                           capture_output=True, text=True, timeout=600, cwd=tmp)
    except FileNotFoundError:
        return "npm is not installed"
    except subprocess.TimeoutExpired:
        return f"`npm pack {spec}` timed out"
    if r.returncode != 0:
        tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
        return f"`npm pack {spec}` failed: {tail}"
    tarball = os.path.join(tmp, f"{name}-{version}.tgz")
    if not os.path.isfile(tarball):
        return f"`npm pack {spec}` wrote no {os.path.basename(tarball)}"
    with open(tarball, "rb") as f:
        digest = "sha512-" + base64.b64encode(hashlib.sha512(f.read()).digest()).decode()
    if digest != integrity:
        return f"the downloaded {os.path.basename(tarball)} does not match the pinned sha512"
    with tarfile.open(tarball) as tar:
        for fname in files:
            try:
                member = tar.getmember(f"{folder}/{fname}")
            except KeyError:
                continue
            if not member.isfile():
                continue
            with tar.extractfile(member) as src, open(os.path.join(staged, fname), "wb") as dst:
                shutil.copyfileobj(src, dst)
    missing = [n for n in required if not os.path.isfile(os.path.join(staged, n))]
    return f"the npm tarball lacks {', '.join(missing)}" if missing else None


def copy_pyodide(src: str, site_dir: str) -> None:
    """Pyodide's runtime files into ``site_dir``/pyodide (unchanged files are left alone)."""
    dst_dir = os.path.join(site_dir, "pyodide")
    os.makedirs(dst_dir, exist_ok=True)
    for name in PYODIDE_FILES:
        src_file, dst = os.path.join(src, name), os.path.join(dst_dir, name)
        if os.path.isfile(src_file) and not _same_file(src_file, dst):
            shutil.copyfile(src_file, dst)


def _same_file(src: str, dst: str) -> bool:
    try:
        a, b = os.stat(src), os.stat(dst)
    except OSError:
        return False
    return a.st_size == b.st_size and int(a.st_mtime) <= int(b.st_mtime)


# -- the browser wheel -----------------------------------------------------------------------------------
def runtime_modules(package_dir: str = PACKAGE_DIR) -> list[str]:
    """Paths (relative to the package) of every module the runtime can import, with their packages'
    ``__init__.py``: the modules under RUNTIME_ROOTS and what they import from webinfer, transitively."""
    todo = ["__init__.py"]
    for root in RUNTIME_ROOTS:
        if root.endswith(".py"):
            todo.append(root)
            continue
        todo += [f"{root}/{n}" for n in sorted(os.listdir(os.path.join(package_dir, root))) if n.endswith(".py")]
    seen: set[str] = set()
    while todo:
        rel = todo.pop()
        if rel in seen or not os.path.isfile(os.path.join(package_dir, rel)):
            continue
        seen.add(rel)
        parts = rel.split("/")[:-1]
        for i in range(len(parts)):
            todo.append("/".join(parts[:i + 1] + ["__init__.py"]))
        with open(os.path.join(package_dir, rel), encoding="utf-8") as f:
            tree = ast.parse(f.read(), rel)
        for target in _imported(tree, parts):
            todo += [target + ".py", target + "/__init__.py"]
    return sorted(seen)


def _imported(tree: ast.AST, package: list[str]):
    """Module paths (relative to webinfer, no suffix) that ``tree`` imports, including ``from x import sub``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                head, _, rest = alias.name.partition(".")
                if head == "webinfer" and rest:
                    yield rest.replace(".", "/")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)] if node.level > 1 else list(package)
                mod = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "webinfer":
                mod = node.module.split(".")[1:]
            else:
                continue
            if mod:
                yield "/".join(mod)
            for alias in node.names:
                yield "/".join(mod + [alias.name])


def browser_wheel(out_dir: str) -> str:
    """Write ``webinfer-<version>-py3-none-any.whl`` with the runtime modules into ``out_dir``; returns its path.

    Assembled from the installed package (no build backend, no source checkout); the same files give the
    same bytes, so browsers can keep it cached."""
    name = f"webinfer-{__version__}"
    info = f"{name}.dist-info"
    files = {f"webinfer/{rel}": _read(os.path.join(PACKAGE_DIR, rel)) for rel in runtime_modules()}
    files[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: webinfer\nVersion: {__version__}\n"
                                 "Summary: webinfer's runtime for the browser (Pyodide): standard-library "
                                 "Python only\n").encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: webinfer.web\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = [f"{path},sha256={_b64sha(data)},{len(data)}" for path, data in files.items()]
    files[f"{info}/RECORD"] = ("\n".join(record + [f"{info}/RECORD,,"]) + "\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in files.items():
            entry = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(entry, data)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{name}-py3-none-any.whl")
    with open(path, "wb") as f:
        f.write(buf.getvalue())
    return path


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _b64sha(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
