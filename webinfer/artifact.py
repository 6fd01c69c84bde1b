"""The artifact: the only thing that crosses from build to run. Standard library only.

A directory holding ``manifest.json``, ``shaders/*.wgsl`` and ``weights/shard-NNN.bin`` (at most 16 MiB
each). The manifest records the sha256 of every file; loading checks the format version, that every path
stays inside the directory, and every hash, so a truncated or altered file is named in a clear error.

Version 2: one tensor table (``tensors``, ``inputs``, ``states``) shared by one program per kernel class
(``programs``: each with its ``steps``, ``outputs``, ``weights``, ``requires`` and ``adapter_types``) and the
build's ``options``. A session runs one program (runtime/select.py chooses it); :func:`program_view` gives
that program as one flat manifest (``steps``, ``outputs``, ``placement`` at the top, as in version 1).
"""

from __future__ import annotations

import hashlib
import json
import os
import re

from .errors import WebinferError

FORMAT = "webinfer-artifact"
VERSION = 2
SHARD_BYTES = 16 * 1024 * 1024
_SAFE_PATH = re.compile(r"^(shaders|weights|assets)/(?!\.\.?$)[A-Za-z0-9_.-]+$")
MANIFEST = "manifest.json"
MANIFEST_SHA = "manifest.sha256"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ArtifactWriter:
    """Collects shaders and weight bytes, packs weights into shards, writes the directory."""

    def __init__(self, path: str):
        self.path = path
        self.shaders: list[str] = []
        self._shader_index: dict[str, int] = {}
        self.shards: list[bytearray] = [bytearray()]
        self.assets: dict[str, bytes] = {}

    def add_shader(self, wgsl: str) -> int:
        """Store a shader once; identical kernels share a file."""
        if wgsl not in self._shader_index:
            self._shader_index[wgsl] = len(self.shaders)
            self.shaders.append(wgsl)
        return self._shader_index[wgsl]

    def add_weight(self, data: bytes) -> list[list[int]]:
        """Append bytes, splitting across shards; returns chunks [shard, offset, nbytes, dst_offset]."""
        chunks = []
        done = 0
        while done < len(data) or not chunks:
            shard = self.shards[-1]
            pad = (-len(shard)) % 256
            if len(shard) + pad >= SHARD_BYTES:
                self.shards.append(bytearray())
                continue
            shard.extend(b"\0" * pad)
            room = SHARD_BYTES - len(shard)
            piece = data[done : done + room]
            chunks.append([len(self.shards) - 1, len(shard), len(piece), done])
            shard.extend(piece)
            done += len(piece)
            if not data:
                break
        return chunks

    def add_asset(self, name: str, data: bytes) -> str:
        rel = f"assets/{name}"
        if not _SAFE_PATH.match(rel):
            raise ValueError(f"bad asset name {name!r}")
        self.assets[rel] = data
        return rel

    def write(self, manifest: dict) -> dict:
        self._clear_target()
        os.makedirs(os.path.join(self.path, "shaders"), exist_ok=True)
        os.makedirs(os.path.join(self.path, "weights"), exist_ok=True)
        files = []
        for i, wgsl in enumerate(self.shaders):
            files.append(self._write_file(f"shaders/k{i:04d}.wgsl", wgsl.encode()))
        shards = [self._write_file(f"weights/shard-{i:03d}.bin", bytes(s)) for i, s in enumerate(self.shards)]
        assets = {rel: self._write_file(rel, data) for rel, data in self.assets.items()}
        manifest = dict(manifest, format=FORMAT, version=VERSION, shaders=files, shards=shards, assets=assets)
        with open(os.path.join(self.path, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=1)
        return manifest

    def _clear_target(self) -> None:
        """Rebuilding over an old artifact replaces it; any other non-empty folder is left alone."""
        check_replaceable(self.path)
        if not os.path.isfile(os.path.join(self.path, MANIFEST)):
            return
        for rel in _named_files(self.path):
            os.remove(os.path.join(self.path, rel))
        for sub in ("shaders", "weights", "assets"):
            folder = os.path.join(self.path, sub)
            if os.path.isdir(folder) and not os.path.islink(folder) and not os.listdir(folder):
                os.rmdir(folder)

    def _write_file(self, rel: str, data: bytes) -> dict:
        if rel.startswith("assets/"):
            os.makedirs(os.path.join(self.path, "assets"), exist_ok=True)
        with open(os.path.join(self.path, rel), "wb") as f:
            f.write(data)
        return {"file": rel, "bytes": len(data), "sha256": sha256(data)}


def check_replaceable(path: str) -> None:
    """``path`` may be (re)written as an artifact: it is missing, empty, or holds a webinfer artifact (its
    manifest parses as one). Anything else belongs to someone else and is never cleared."""
    if not os.path.isdir(path) or not os.listdir(path):
        return
    mpath = os.path.join(path, MANIFEST)
    if not os.path.isfile(mpath):
        raise WebinferError(f"{path} exists and is not a webinfer artifact; refusing to overwrite it")
    try:
        with open(mpath, "rb") as f:
            manifest = json.loads(f.read())
    except (OSError, ValueError, RecursionError):
        manifest = None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise WebinferError(f"{path} holds a manifest.json that is not a webinfer artifact's; "
                            "refusing to overwrite it")
    for sub in ("shaders", "weights", "assets"):
        if os.path.islink(os.path.join(path, sub)):
            raise WebinferError(f"{path}/{sub} is a symbolic link; refusing to overwrite the artifact")


def _named_files(path: str) -> list[str]:
    """The files an old artifact's manifest names (its own files, inside its folder), and the manifest."""
    with open(os.path.join(path, MANIFEST), "rb") as f:
        manifest = json.loads(f.read())
    names = [e.get("file") for g in ("shaders", "shards") for e in _list(manifest.get(g)) if isinstance(e, dict)]
    assets = manifest.get("assets")
    names += list(assets) if isinstance(assets, dict) else []
    names = [n for n in names if isinstance(n, str) and _SAFE_PATH.match(n)]
    names += [MANIFEST, MANIFEST_SHA]
    return [n for n in dict.fromkeys(names)
            if os.path.lexists(os.path.join(path, n)) and not os.path.isdir(os.path.join(path, n))]


def _list(value) -> list:
    return value if isinstance(value, list) else []


class Artifact:
    """A loaded artifact: the manifest plus checked access to its files."""

    def __init__(self, path: str, manifest: dict):
        self.path = path
        self.manifest = manifest

    @classmethod
    def load(cls, path: str) -> "Artifact":
        mpath = os.path.join(path, "manifest.json")
        if not os.path.isfile(mpath):
            raise WebinferError(f"{path}: not a webinfer artifact (no manifest.json)")
        try:
            with open(mpath) as f:
                manifest = json.load(f)
        except (ValueError, UnicodeDecodeError) as e:
            raise WebinferError(f"{mpath}: manifest is not valid JSON ({e})") from None
        check_manifest(manifest, mpath)
        return cls(path, manifest)

    def read(self, entry: dict) -> bytes:
        """Read one file named by the manifest, checking its size and sha256."""
        rel = entry["file"]
        full = self.file_path(rel)
        try:
            with open(full, "rb") as f:
                data = f.read()
        except OSError:
            raise WebinferError(f"{full}: file named by the manifest is missing") from None
        verify(entry, data, full)
        return data

    def file_path(self, rel: str) -> str:
        """The full path of a file the manifest names; a symbolic link leading out of the artifact is refused."""
        full = os.path.join(self.path, rel)
        root = os.path.realpath(self.path)
        if os.path.commonpath([root, os.path.realpath(full)]) != root:
            raise WebinferError(f"{full}: leads out of the artifact (symbolic link); refused")
        return full

    def files(self) -> list[str]:
        """Every file that makes up the artifact (relative paths): the manifest and the files it names."""
        m = self.manifest
        named = [e["file"] for e in m["shaders"]] + [e["file"] for e in m["shards"]] + list(m.get("assets", {}))
        extra = [MANIFEST_SHA] if os.path.isfile(os.path.join(self.path, MANIFEST_SHA)) else []
        files = [MANIFEST, *extra, *named]
        for rel in files:
            self.file_path(rel)
        return files

    def shader_sources(self) -> list[str]:
        return [self.read(e).decode() for e in self.manifest["shaders"]]

    def shader(self, index: int) -> str:
        """One shader's source (a session reads only its program's)."""
        return self.read(self.manifest["shaders"][index]).decode()


def program_view(manifest: dict, index: int) -> dict:
    """The manifest as one program sees it: its steps, outputs and placement at the top level."""
    programs = manifest.get("programs") or []
    if not 0 <= index < len(programs):
        raise WebinferError(f"the artifact has no program {index} ({len(programs)} programs)")
    p = programs[index]
    return dict(manifest, steps=p["steps"], outputs=p["outputs"], placement=p.get("placement", []),
                control=p.get("control", []), guards=p.get("guards", []), program=p, program_index=index)


def check_manifest(manifest: dict, where: str) -> None:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise WebinferError(f"{where}: not a webinfer artifact manifest")
    if manifest.get("version") != VERSION:
        raise WebinferError(
            f"{where}: artifact format version {manifest.get('version')} is not supported "
            f"(this webinfer reads version {VERSION}); rebuild the model"
        )
    if not isinstance(manifest.get("programs"), list) or not manifest["programs"]:
        raise WebinferError(f"{where}: manifest has no programs")
    for group in ("shaders", "shards"):
        for entry in manifest.get(group, []):
            if not _SAFE_PATH.match(str(entry.get("file", ""))):
                raise WebinferError(f"{where}: manifest names an unsafe file path {entry.get('file')!r}")
    for rel in manifest.get("assets", {}):
        if not _SAFE_PATH.match(rel):
            raise WebinferError(f"{where}: manifest names an unsafe file path {rel!r}")


def verify(entry: dict, data: bytes, name: str) -> None:
    if len(data) != entry["bytes"]:
        raise WebinferError(
            f"{name}: file is {len(data)} bytes, the manifest expects {entry['bytes']} (truncated or altered)"
        )
    if sha256(data) != entry["sha256"]:
        raise WebinferError(f"{name}: sha256 does not match the manifest (file altered or corrupt)")
