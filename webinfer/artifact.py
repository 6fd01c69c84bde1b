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
import shutil
import tempfile
import weakref

from .errors import WebinferError
from .format.manifest import check_step_shader, parse_manifest
from .format.schema import FORMAT, VERSION, FileEntry, Manifest, WeightPacker

_SAFE_PATH = re.compile(r"^(shaders|weights|assets)/(?!\.\.?$)[A-Za-z0-9_.-]+$")
MANIFEST = "manifest.json"
MANIFEST_SHA = "manifest.sha256"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# The source model as standard ONNX, stored by ``build(..., cpu=True)`` for the CPU path (onnxruntime, natively
# and onnxruntime-web's wasm backend in pages without WebGPU); the GPU path never reads it.
CPU_MODEL = "assets/cpu-model.onnx"


class ArtifactWriter:
    """Collects shaders and weight bytes, packs weights into shards, writes the directory."""

    def __init__(self, path: str):
        self.path = path
        self.shaders: list[str] = []
        self._shader_index: dict[str, int] = {}
        self.shards: list[bytearray | None] = [bytearray()]  # None: spilled to the scratch folder
        self.spilled: dict[int, tuple[str, int, str]] = {}  # shard -> (scratch file, bytes, sha256)
        self._scratch: str | None = None
        self.packer = WeightPacker()
        self.assets: dict[str, bytes] = {}

    def add_shader(self, wgsl: str) -> int:
        """Store a shader once; identical kernels share a file."""
        if wgsl not in self._shader_index:
            self._shader_index[wgsl] = len(self.shaders)
            self.shaders.append(wgsl)
        return self._shader_index[wgsl]

    def add_weight(self, data: bytes) -> list[list[int]]:
        """Append bytes, splitting across shards (format/schema.py WeightPacker); returns chunks
        [shard, offset, nbytes, dst_offset]."""
        chunks = self.packer.add(len(data))
        for shard, offset, n, dst in chunks:
            while len(self.shards) <= shard:
                self.shards.append(bytearray())
            buf = self.shards[shard]
            buf.extend(b"\0" * (offset - len(buf)))
            buf.extend(data[dst : dst + n])
        for i in range(len(self.shards) - 1):  # shards fill in order: all but the last are complete
            if self.shards[i] is not None:
                self._spill(i)
        return chunks

    def _spill(self, i: int) -> None:
        """Write a complete shard to a scratch folder beside the artifact (moved in by ``write``), so a build
        never holds all of a model's weight bytes at once on top of its graph (issue 37: multi-GB models)."""
        if self._scratch is None:
            parent = os.path.dirname(os.path.abspath(self.path))
            os.makedirs(parent, exist_ok=True)
            self._scratch = tempfile.mkdtemp(prefix=".webinfer-shards-", dir=parent)
            weakref.finalize(self, shutil.rmtree, self._scratch, True)  # also when a build fails after this
        data, self.shards[i] = self.shards[i], None
        name = os.path.join(self._scratch, f"shard-{i:03d}.bin")
        with open(name, "wb") as f:
            f.write(data)
        self.spilled[i] = (name, len(data), sha256(data))

    def add_asset(self, name: str, data: bytes) -> str:
        rel = f"assets/{name}"
        if not _SAFE_PATH.match(rel):
            raise ValueError(f"bad asset name {name!r}")
        self.assets[rel] = data
        return rel

    def write(self, manifest: dict) -> dict:
        shaders = {f"shaders/k{i:04d}.wgsl": wgsl.encode() for i, wgsl in enumerate(self.shaders)}
        shards = {f"weights/shard-{i:03d}.bin": s for i, s in enumerate(self.shards)}  # (no copy: hashed, written)
        entry = lambda rel, data: {"file": rel, "bytes": len(data), "sha256": sha256(data)}  # noqa: E731
        manifest = dict(manifest, format=FORMAT, version=VERSION,
                        shaders=[entry(rel, data) for rel, data in shaders.items()],
                        shards=[{"file": rel, "bytes": self.spilled[i][1], "sha256": self.spilled[i][2]}
                                if data is None else entry(rel, data) for i, (rel, data) in enumerate(shards.items())],
                        assets={rel: entry(rel, data) for rel, data in self.assets.items()})
        self._check_own(manifest)  # before anything is written or replaced
        self._clear_target()
        for sub in ("shaders", "weights", *(["assets"] if self.assets else [])):
            os.makedirs(os.path.join(self.path, sub), exist_ok=True)
        for i, (rel, data) in enumerate(shards.items()):
            if data is None:
                shutil.move(self.spilled[i][0], os.path.join(self.path, rel))
        for rel, data in {**shaders, **{r: d for r, d in shards.items() if d is not None}, **self.assets}.items():
            with open(os.path.join(self.path, rel), "wb") as f:
                f.write(data)
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
        data = json.dumps(manifest, indent=1).encode()
        with open(os.path.join(self.path, MANIFEST), "wb") as f:
            f.write(data)
        with open(os.path.join(self.path, MANIFEST_SHA), "w") as f:
            f.write(f"{sha256(data)}  {MANIFEST}\n")
        return manifest

    def _check_own(self, manifest: dict) -> None:
        """The builder holds itself to the schema the runtime enforces: a manifest it cannot read back is a
        bug of ours, found at build time rather than by a user's run."""
        try:
            spec = parse_manifest(manifest, "the manifest just built")
            for i, wgsl in enumerate(self.shaders):
                shader_text(wgsl.encode(), spec, i, f"shader {i} just built")
        except WebinferError as e:
            raise RuntimeError(f"webinfer built an invalid artifact: {e}") from None

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
    """A loaded artifact: the manifest (checked against manifest.sha256 and the schema, format/) plus checked
    access to its files. ``manifest`` is the JSON object, ``spec`` the typed one."""

    manifest_sha256: str | None = None  # set by load: the artifact's identity (a saved prefix cache records it)

    def __init__(self, path: str, manifest: dict, spec: Manifest | None = None):
        self.path = path
        self.manifest = manifest
        self.spec = spec or parse_manifest(manifest, os.path.join(path, MANIFEST))
        self._checked_shaders: dict[int, str] = {}

    @classmethod
    def load(cls, path: str) -> "Artifact":
        mpath = os.path.join(path, MANIFEST)
        if not os.path.isfile(mpath):
            raise WebinferError(f"{path}: not a webinfer artifact (no manifest.json)")
        art = cls.__new__(cls)
        art.path = path
        raw = art._read_plain(MANIFEST)
        if not os.path.lexists(os.path.join(path, MANIFEST_SHA)):
            raise WebinferError(f"{path}: no {MANIFEST_SHA} beside the manifest (an artifact from an older "
                                "webinfer, or a damaged one); rebuild it")
        sha = art._read_plain(MANIFEST_SHA)
        manifest, spec = parse_manifest_bytes(raw, sha, mpath)
        cls.__init__(art, path, manifest, spec)
        art.manifest_sha256 = sha256(raw)
        return art

    def _read_plain(self, rel: str) -> bytes:
        full = self.file_path(rel)
        try:
            with open(full, "rb") as f:
                return f.read()
        except OSError:
            raise WebinferError(f"{full}: missing or unreadable") from None

    def read(self, entry: FileEntry) -> bytes:
        """Read one file named by the manifest, checking its size and sha256."""
        rel = entry.file
        full = self.file_path(rel)
        try:
            with open(full, "rb") as f:
                data = f.read()
        except OSError:
            raise WebinferError(f"{full}: file named by the manifest is missing or unreadable") from None
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
        """Every file that makes up the artifact (relative paths): the manifest, its sha256 and the files it
        names."""
        m = self.spec
        named = [e.file for e in m.shaders] + [e.file for e in m.shards] + list(m.assets)
        files = [MANIFEST, MANIFEST_SHA, *named]
        for rel in files:
            self.file_path(rel)
        return files

    def shader(self, index: int) -> str:
        """One shader's source, checked: its bytes (sha256), UTF-8, and its bindings and uniforms against every
        step that runs it (a session reads only its program's shaders)."""
        if index not in self._checked_shaders:
            entry = self.spec.shaders[index]
            self._checked_shaders[index] = shader_text(self.read(entry), self.spec, index,
                                                       self.file_path(entry.file))
        return self._checked_shaders[index]

    def shader_sources(self) -> list[str]:
        return [self.shader(i) for i in range(len(self.spec.shaders))]

    def read_shard(self, index: int) -> bytes:
        """Weight shard ``index``'s bytes, checked."""
        return self.read(self.spec.shards[index])

    def read_asset(self, name: str) -> bytes | None:
        """The asset ``assets/<name>``'s bytes, checked; None when the artifact has none by that name."""
        entry = self.spec.assets.get(f"assets/{name}")
        return None if entry is None else self.read(entry)

    def verify_all(self) -> None:
        """Everything a run of any program would check in the files: every shard's and asset's bytes, every
        shader's bytes, text, bindings and uniforms."""
        self.shader_sources()
        for entry in self.spec.shards:
            self.read(entry)
        for entry in self.spec.assets.values():
            self.read(entry)


def parse_manifest_bytes(raw: bytes, sha_text: bytes, where: str) -> tuple[dict, Manifest]:
    """manifest.json's bytes, checked against manifest.sha256 (``<hex>  manifest.json``), then parsed: the JSON
    object and the typed manifest. Shared by the native loader and the browser page."""
    want = sha_text.decode("ascii", "replace").split()
    if not want or want[0] != sha256(raw):
        raise WebinferError(f"{where}: sha256 does not match {MANIFEST_SHA} (manifest altered or corrupt)")
    try:
        manifest = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:
        raise WebinferError(f"{where}: manifest is not valid JSON ({type(e).__name__}: {str(e)[:80]})") from None
    return manifest, parse_manifest(manifest, where)


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def shader_text(data: bytes, spec: Manifest, index: int, where: str) -> str:
    """A shader file's text (UTF-8), checked against every step (of any program) that runs it."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise WebinferError(f"{where}: shader is not UTF-8 text (byte {e.start})") from None
    for program in spec.programs:
        for step in program.steps:
            if step.shader == index:
                check_step_shader(step, text, where, dict(program.textures))
    return text


def program_view(manifest: dict, index: int) -> dict:
    """The manifest as one program sees it: its steps, outputs and placement at the top level."""
    programs = manifest.get("programs") or []
    if not 0 <= index < len(programs):
        raise WebinferError(f"the artifact has no program {index} ({len(programs)} programs)")
    p = programs[index]
    return dict(manifest, steps=p["steps"], outputs=p["outputs"], placement=p.get("placement", []),
                control=p.get("control", []), guards=p.get("guards", []), branch_guards=p.get("branch_guards", []),
                program=p, program_index=index)


def verify(entry: FileEntry, data: bytes, name: str) -> None:
    if len(data) != entry.bytes:
        raise WebinferError(
            f"{name}: file is {len(data)} bytes, the manifest expects {entry.bytes} (truncated or altered)"
        )
    if sha256(data) != entry.sha256:
        raise WebinferError(f"{name}: sha256 does not match the manifest (file altered or corrupt)")
