"""Artifacts built once and reused while nothing that made them changed: the source model (path, size, mtime),
the build options and webinfer's own compiler source. The demo site and the benchmarks that keep an artifact
between runs use it, so a benchmark never times an artifact an older compiler wrote."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def source_key() -> str:
    """A hash of webinfer's sources (a change in the compiler may change the artifact; the pages cannot)."""
    h = hashlib.sha256()
    pages = ROOT / "webinfer" / "site"
    for path in sorted((ROOT / "webinfer").rglob("*")):
        if path.is_file() and path.suffix in (".py", ".j2", ".wgsl") and "__pycache__" not in path.parts \
                and pages not in path.parents:
            h.update(str(path.relative_to(ROOT)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def built(source: Path, out: Path, options: dict, key: str | None = None, log=print) -> tuple[Path, dict | None]:
    """``out`` built from ``source`` with ``options`` (webinfer.build's keywords), or reused when its stamp
    (``out`` + ``.key``) says the same source, options and compiler made it. Returns (out, the new manifest or
    None when reused). ``key``: a precomputed :func:`source_key` (hashing the sources takes a moment)."""
    from webinfer.build import build

    st = source.stat()
    stamp_text = json.dumps({"source": str(source), "size": st.st_size, "mtime": int(st.st_mtime),
                             "options": options, "webinfer": key or source_key()}, sort_keys=True)
    stamp = out.with_name(out.name + ".key") if out.suffix != ".wi" else out.with_suffix(".key")
    if (out / "manifest.json").is_file() and stamp.is_file() and stamp.read_text() == stamp_text:
        log(f"{out.name}: reusing {out}")
        return out, None
    t0 = time.perf_counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    manifest = build(str(source), str(out), **options)
    stamp.write_text(stamp_text)
    log(f"{out.name}: built in {time.perf_counter() - t0:.1f} s")
    return out, manifest
