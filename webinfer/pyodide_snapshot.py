"""A memory snapshot of a booted Pyodide for the site (``pyodide/snapshot.bin.gz``): a page restores the
interpreter from it instead of starting Python (cold: 4.4 s -> 0.6 s to a usable interpreter in headless
Chromium here), the site's critical path on the CPU path's similarity page.

The snapshot is made with Node (``node`` on PATH) from the very Pyodide files copied into the site, after
importing the standard-library modules webinfer's browser wheel and Pyodide's wheel installer use (found by
importing the wheel's page modules from a scratch folder, then dropping webinfer's own modules again: the
snapshot holds no webinfer code, the page still installs the wheel). Pyodide checks its build id when
restoring; the page checks the file's sha256 (site.json ``pyodide_snapshot``) and falls back to a plain boot,
with one console line, when the snapshot is missing, altered or from another build. Without Node the site
has no snapshot (plain boot). Cached by the digest of Pyodide's files, the wheel and the recipe.
Build-side module.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .web import cache_root

SNAPSHOT_FILE = "snapshot.bin.gz"
_KEEP = 4  # snapshots kept in the cache (one per wheel: a changed runtime module makes a new one)
_PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")

# Node: boot Pyodide with _makeSnapshot, import what the wheel's page modules need (from a scratch copy of the
# wheel), forget webinfer's modules, write the heap. sys.executable and os.environ's `_` would otherwise carry
# this machine's paths; LANG is what a browser boot sets for en-US.
_MAKE = r"""
const [indexURL, wheel, out] = process.argv.slice(-3);
const { readFileSync, writeFileSync } = await import("node:fs");
const { pathToFileURL } = await import("node:url");
const { loadPyodide } = await import(pathToFileURL(indexURL + "pyodide.mjs").href);
const py = await loadPyodide({ indexURL, _makeSnapshot: true, _sysExecutable: "./this.program",
                              env: { _: "./this.program", LANG: "en_US.UTF-8" } });
py.FS.writeFile("/tmp/webinfer.whl", readFileSync(wheel));
py.runPython(`
import gc, importlib, os, shutil, sys, zipfile
# what Pyodide's wheel installer (loadPackage) imports
import email, email.parser, importlib.metadata, tarfile, zipfile
zipfile.ZipFile("/tmp/webinfer.whl").extractall("/tmp/webinfer_wheel")
sys.path.insert(0, "/tmp/webinfer_wheel")
import webinfer.page_cpu, webinfer.page
sys.path.remove("/tmp/webinfer_wheel")
sys.path_importer_cache.pop("/tmp/webinfer_wheel", None)
for name in [m for m in sys.modules if m == "webinfer" or m.startswith("webinfer.")]:
    del sys.modules[name]
shutil.rmtree("/tmp/webinfer_wheel")
os.remove("/tmp/webinfer.whl")
importlib.invalidate_caches()
sys.path.remove("")  # (loadPyodide puts it back in front when restoring)
gc.collect()
`);
writeFileSync(out, py.makeMemorySnapshot());
"""


def _digest(pyodide_src: str, wheel: str) -> str:
    h = hashlib.sha256(_MAKE.encode())
    for path in [os.path.join(pyodide_src, n) for n in _PYODIDE_FILES] + [wheel]:
        with open(path, "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def _make(pyodide_src: str, wheel: str, out: Path) -> str | None:
    """Write the gzipped snapshot to ``out``; None, or why it could not be made."""
    node = shutil.which("node")
    if node is None:
        return "no `node` on PATH to make it"
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "snapshot.bin")
        index = os.path.abspath(pyodide_src).rstrip("/") + "/"
        try:
            proc = subprocess.run([node, "--input-type=module", "-e", _MAKE, "--", index, os.path.abspath(wheel), raw],
                                  capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"node failed: {e}"
        if proc.returncode != 0 or not os.path.isfile(raw):
            tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            return f"node exited {proc.returncode}: {tail[:200]}"
        with open(raw, "rb") as f:
            data = gzip.compress(f.read(), compresslevel=6, mtime=0)
    tmp_out = out.with_suffix(".part")
    tmp_out.write_bytes(data)
    os.replace(tmp_out, out)
    return None


def site_snapshot(pyodide_src: str, wheel: str, site_dir: str) -> tuple[dict | None, str | None]:
    """Put the snapshot for Pyodide at ``pyodide_src`` and ``wheel`` into ``site_dir``/pyodide; returns (its
    site.json entry, None) or (None, why the site goes without one)."""
    key = _digest(pyodide_src, wheel)
    cache = Path(cache_root()) / "pyodide-snapshot"
    cache.mkdir(parents=True, exist_ok=True)
    cached = cache / f"{key[:32]}.bin.gz"
    if not cached.is_file():
        why = _make(pyodide_src, wheel, cached)
        if why is not None:
            return None, why
        for old in sorted(cache.glob("*.bin.gz"), key=lambda p: p.stat().st_mtime)[:-_KEEP]:
            old.unlink(missing_ok=True)
    data = cached.read_bytes()
    shutil.copyfile(cached, os.path.join(site_dir, "pyodide", SNAPSHOT_FILE))
    return {"path": f"pyodide/{SNAPSHOT_FILE}", "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}, None


def add_to_site(site: dict, pyodide_src: str | None, wheel: str, site_dir: str) -> None:
    """Set site.json's ``pyodide_snapshot`` for a site that serves its own Pyodide (a CDN's Pyodide gets none);
    a site without one says why, in one line."""
    site.pop("pyodide_snapshot", None)
    if pyodide_src is None:
        return
    entry, why = site_snapshot(pyodide_src, wheel, site_dir)
    if entry is None:
        stale = os.path.join(site_dir, "pyodide", SNAPSHOT_FILE)
        if os.path.exists(stale):
            os.remove(stale)
        print(f"webinfer: note: no Pyodide snapshot in the site ({why}): its pages boot Python plainly",
              file=sys.stderr)
        return
    site["pyodide_snapshot"] = entry
