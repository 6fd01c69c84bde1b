"""Reading the manifest's JSON into the typed schema (format/schema.py), field by field: each value must have its
field's type and range, and an object must hold exactly its fields. Standard library only.

Errors name the field by its path, e.g. ``manifest programs[0].steps[2].grid: expected 3 dims, got 2``.
Cross-field rules (indices, sizes, coverage) are in format/checks.py.
"""

from __future__ import annotations

import math

from ..dtypes import DTYPES
from ..errors import WebinferError
from .audio import read_audio
from .blocks import Audio, Classify, Detect, Preprocess, Segment, Seq2Seq, typed
from .guards import read_branch_guards, read_guard
from .output_formats import read_output_formats
from .schema import (
    _FILE_NAME,
    _FOLDERS,
    _MAX_DEPTH,
    _SHA256,
    DIM_OPS,
    FORMAT,
    KINDS,
    MAX_INT,
    UNIFORM_RANGES,
    VERSION,
    Chunk,
    CountEntry,
    FileEntry,
    IfEntry,
    LoopEntry,
    Manifest,
    Named,
    Pass,
    Placement,
    Program,
    Requires,
    Scalar,
    Step,
    Tensor,
    Uniform,
    When,
)
from .seq2seq import read_seq2seq
from .textures import FORMATS as TEXTURE_FORMATS
from .vision_fields import VISION_READERS


class _Reader:
    def __init__(self, where: str):
        self.where = where
        self.dims: set[str] = set()

    def fail(self, path: str, message: str):
        raise WebinferError(f"{self.where}: manifest {path}: {message}")

    def obj(self, v, path: str, required: tuple, optional: tuple = ()) -> dict:
        if not isinstance(v, dict):
            self.fail(path, f"expected an object, got {_kind(v)}")
        for key in v:
            if key not in required and key not in optional:
                self.fail(path, f"unknown field {str(key)[:40]!r}")
        for key in required:
            if key not in v:
                self.fail(path, f"missing field {key!r}")
        return v

    def list(self, v, path: str, length: int | None = None) -> list:
        if not isinstance(v, list):
            self.fail(path, f"expected a list, got {_kind(v)}")
        if length is not None and len(v) != length:
            self.fail(path, f"expected {length} items, got {len(v)}")
        return v

    def int(self, v, path: str, lo: int = 0, hi: int = MAX_INT) -> int:
        if not isinstance(v, int) or isinstance(v, bool):
            self.fail(path, f"expected an integer, got {_kind(v)}")
        if not lo <= v <= hi:
            self.fail(path, f"{v} is out of range ({lo}..{hi})")
        return v

    def str(self, v, path: str, choices=None, max_len: int = 4096) -> str:
        if not isinstance(v, str):
            self.fail(path, f"expected a string, got {_kind(v)}")
        if len(v) > max_len:
            self.fail(path, f"string of {len(v)} characters is too long")
        if choices is not None and v not in choices:
            self.fail(path, f"{v[:40]!r} is not one of {', '.join(choices)}")
        return v

    def number(self, v, path: str) -> float:
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
            self.fail(path, f"expected a finite number, got {_kind(v)}")
        return v

    def strs(self, v, path: str, unique: bool = True) -> tuple:
        items = tuple(self.str(x, f"{path}[{i}]") for i, x in enumerate(self.list(v, path)))
        if unique and len(set(items)) != len(items):
            self.fail(path, "names repeat")
        return items

    def dim(self, v, path: str, depth: int = 0):
        """A dim expression: an int, a name from ``dims``, or [op, args...] (dims.to_json's form)."""
        if depth > _MAX_DEPTH:
            self.fail(path, "dim expression nested too deeply")
        if isinstance(v, bool) or not isinstance(v, (int, str, list)):
            self.fail(path, f"expected a dim (integer, name or expression), got {_kind(v)}")
        if isinstance(v, int):
            return self.int(v, path, -MAX_INT, MAX_INT)
        if isinstance(v, str):
            if v not in self.dims:
                self.fail(path, f"dim {v[:40]!r} is not one of the artifact's dims")
            return v
        if not v or not isinstance(v[0], str) or v[0] not in DIM_OPS:
            self.fail(path, "expected a dim expression [operator, ...] with operator " + " ".join(DIM_OPS))
        arity = DIM_OPS[v[0]]
        if (arity is None and len(v) < 2) or (arity is not None and len(v) != arity + 1):
            self.fail(path, f"operator {v[0]!r} has {len(v) - 1} operand(s)")
        for i, x in enumerate(v[1:]):
            self.dim(x, f"{path}[{i + 1}]", depth + 1)
        return v

    def shape(self, v, path: str) -> tuple:
        dims = tuple(self.dim(d, f"{path}[{i}]") for i, d in enumerate(self.list(v, path)))
        for i, d in enumerate(dims):
            if isinstance(d, int) and d < 0:
                self.fail(f"{path}[{i}]", f"negative dim {d}")
        return dims

    def file(self, v, path: str, group: str) -> FileEntry:
        self.obj(v, path, ("file", "bytes", "sha256"))
        name = self.str(v["file"], f"{path}.file", max_len=200)
        if not _FILE_NAME.match(name) or not name.startswith(_FOLDERS[group] + "/"):
            self.fail(f"{path}.file", f"unsafe or misplaced file path {name[:60]!r} (expected {_FOLDERS[group]}/NAME)")
        if not _SHA256.match(self.str(v["sha256"], f"{path}.sha256")):
            self.fail(f"{path}.sha256", "expected 64 lowercase hexadecimal digits")
        return FileEntry(name, self.int(v["bytes"], f"{path}.bytes", 0, 2**40), v["sha256"])


def _kind(v) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "an object", type(None): "null"}.get(type(v), type(v).__name__)


_TOP = ("format", "version", "producer", "options", "dims", "inputs", "states", "bounds", "index_bounds", "tensors",
        "programs", "groups", "passes", "shaders", "shards", "assets")


def read_manifest(obj, where: str) -> Manifest:
    r = _Reader(where)
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise WebinferError(f"{where}: not a webinfer artifact manifest")
    if obj.get("version") != VERSION:
        raise WebinferError(f"{where}: artifact format version {str(obj.get('version'))[:20]} is not supported "
                            f"(this webinfer reads version {VERSION}); rebuild the model")
    r.obj(obj, "", _TOP, ("preprocess", "classify", "detect", "segment", "audio", "seq2seq", "output_formats"))
    r.dims = set(r.strs(obj["dims"], "dims")) | _control_dims(obj["programs"])
    bounds = r.obj(obj["bounds"], "bounds", tuple(k for k in obj["bounds"] if k in r.dims)
                   if isinstance(obj["bounds"], dict) else ())
    assets = r.obj(obj["assets"], "assets", tuple(obj["assets"]) if isinstance(obj["assets"], dict) else ())
    index_bounds = r.obj(obj["index_bounds"], "index_bounds",
                         tuple(obj["index_bounds"]) if isinstance(obj["index_bounds"], dict) else ())
    return Manifest(
        format=FORMAT, version=VERSION,
        producer=r.str(obj["producer"], "producer"),
        options=_options(r, obj["options"]),
        dims=tuple(obj["dims"]),
        inputs=_named(r, obj["inputs"], "inputs"),
        states=_named(r, obj["states"], "states"),
        bounds={k: r.int(v, f"bounds.{k}", 0, 2**31 - 1) for k, v in bounds.items()},
        index_bounds={r.str(k, "index_bounds", max_len=200): r.int(v, f"index_bounds.{k[:40]}", 1, 2**31 - 1)
                      for k, v in index_bounds.items()},
        tensors=tuple(_tensor(r, t, f"tensors[{i}]") for i, t in enumerate(r.list(obj["tensors"], "tensors"))),
        programs=tuple(_program(r, p, f"programs[{i}]") for i, p in enumerate(r.list(obj["programs"], "programs"))),
        groups=_groups(r, obj["groups"]),
        passes=tuple(_pass(r, p, f"passes[{i}]") for i, p in enumerate(r.list(obj["passes"], "passes"))),
        shaders=tuple(r.file(e, f"shaders[{i}]", "shaders") for i, e in enumerate(r.list(obj["shaders"], "shaders"))),
        shards=tuple(r.file(e, f"shards[{i}]", "shards") for i, e in enumerate(r.list(obj["shards"], "shards"))),
        assets={k: r.file(e, f"assets.{k}", "assets") for k, e in assets.items()},
        **{key: None if obj.get(key) is None else typed(cls, VISION_READERS[key](r, obj[key]))
           for key, cls in (("preprocess", Preprocess), ("classify", Classify), ("detect", Detect),
                            ("segment", Segment))},
        audio=None if obj.get("audio") is None else typed(Audio, read_audio(r, obj["audio"])),
        seq2seq=None if obj.get("seq2seq") is None else typed(Seq2Seq, read_seq2seq(r, obj["seq2seq"])),
        output_formats=None if obj.get("output_formats") is None else read_output_formats(r, obj["output_formats"]))


def _control_dims(programs) -> set[str]:
    """Dims that control entries bind while running (a loop's iteration and count, a data-dependent count):
    steps and bounds may name them besides ``dims``. (Their entries are typed when the programs are read.)"""
    names = set()
    for p in programs if isinstance(programs, list) else ():
        control = p.get("control") if isinstance(p, dict) else None
        for c in control if isinstance(control, list) else ():  # (a forged non-list is refused when typed)
            if isinstance(c, dict):
                names |= {c.get(k) for k in ("iter", "count", "dim") if isinstance(c.get(k), str)}
    return names


def _options(r: _Reader, v) -> dict:
    """The build options (options.BuildOptions.to_json), a record for reports: the runtime chooses by each
    program's ``requires``. Their own fields belong to options.py; here: the ones reports read."""
    r.obj(v, "options", ("target", "limits", "f16", "classes"), tuple(v) if isinstance(v, dict) else ())
    for key in ("target", "limits", "f16"):
        r.str(v[key], f"options.{key}")
    r.strs(v["classes"], "options.classes")
    return v


def _groups(r: _Reader, v) -> dict:
    """Sequence/optional graph inputs and outputs -> their flat names (a name, a list of names, or None)."""
    r.obj(v, "groups", ("inputs", "outputs"))
    out = {}
    for side in ("inputs", "outputs"):
        entries = r.obj(v[side], f"groups.{side}", tuple(v[side]) if isinstance(v[side], dict) else ())
        for name, flat in entries.items():
            path = f"groups.{side}.{name[:40]}"
            if isinstance(flat, list):
                r.strs(flat, path)
            elif flat is not None:
                r.str(flat, path)
        out[side] = entries
    return out


def _named(r: _Reader, v, path: str) -> tuple[Named, ...]:
    out = []
    for i, e in enumerate(r.list(v, path)):
        r.obj(e, f"{path}[{i}]", ("name", "tensor"))
        out.append(Named(r.str(e["name"], f"{path}[{i}].name"), r.int(e["tensor"], f"{path}[{i}].tensor")))
    if len({n.name for n in out}) != len(out):
        r.fail(path, "names repeat")
    return tuple(out)


def _tensor(r: _Reader, v, path: str) -> Tensor:
    r.obj(v, path, ("dtype", "shape", "kind", "alias"), ("capacity", "chunks", "offset"))
    alias = None if v["alias"] is None else r.int(v["alias"], f"{path}.alias")
    capacity = chunks = None
    if "capacity" in v:
        capacity = tuple(r.int(d, f"{path}.capacity[{i}]", 0, 2**31 - 1)
                         for i, d in enumerate(r.list(v["capacity"], f"{path}.capacity")))
    if "chunks" in v:
        chunks = []
        for i, c in enumerate(r.list(v["chunks"], f"{path}.chunks")):
            c = r.list(c, f"{path}.chunks[{i}]", 4)
            chunks.append(Chunk(*(r.int(x, f"{path}.chunks[{i}][{k}]", 0, 2**40) for k, x in enumerate(c))))
        chunks = tuple(chunks)
    return Tensor(r.str(v["dtype"], f"{path}.dtype", tuple(DTYPES)), r.shape(v["shape"], f"{path}.shape"),
                  r.str(v["kind"], f"{path}.kind", KINDS), alias, capacity, chunks,
                  r.dim(v["offset"], f"{path}.offset") if "offset" in v else None)


def _program(r: _Reader, v, path: str) -> Program:
    r.obj(v, path, ("class", "adapter_types", "requires", "steps", "outputs", "weights", "shaders", "control",
                    "guards", "placement"), ("textures", "branch_guards"))
    req = r.obj(v["requires"], f"{path}.requires", ("features", "limits"))
    limits = r.obj(req["limits"], f"{path}.requires.limits",
                   tuple(req["limits"]) if isinstance(req["limits"], dict) else ())
    requires = Requires(r.strs(req["features"], f"{path}.requires.features"),
                        {k: r.int(n, f"{path}.requires.limits.{k}", 0, 2**40) for k, n in limits.items()})
    return Program(
        kernel_class=r.str(v["class"], f"{path}.class"),
        adapter_types=r.strs(v["adapter_types"], f"{path}.adapter_types"),
        requires=requires,
        steps=tuple(_step(r, s, f"{path}.steps[{i}]") for i, s in enumerate(r.list(v["steps"], f"{path}.steps"))),
        outputs=_named(r, v["outputs"], f"{path}.outputs"),
        weights=tuple(r.int(t, f"{path}.weights[{i}]") for i, t in enumerate(r.list(v["weights"], f"{path}.weights"))),
        shaders=r.int(v["shaders"], f"{path}.shaders"),
        control=tuple(_control(r, c, f"{path}.control[{i}]") for i, c in enumerate(r.list(v["control"], f"{path}.control"))),
        guards=tuple(read_guard(r, g, f"{path}.guards[{i}]") for i, g in enumerate(r.list(v["guards"], f"{path}.guards"))),
        placement=tuple(_placement(r, p, f"{path}.placement[{i}]")
                        for i, p in enumerate(r.list(v["placement"], f"{path}.placement"))),
        textures=tuple(_texture(r, t, f"{path}.textures[{i}]")
                       for i, t in enumerate(r.list(v.get("textures", []), f"{path}.textures"))),
        branch_guards=read_branch_guards(r, v.get("branch_guards"), f"{path}.branch_guards"),
    )


def _texture(r: _Reader, v, path: str) -> tuple[int, str]:
    v = r.list(v, path, 2)
    return r.int(v[0], f"{path}[0]"), r.str(v[1], f"{path}[1]", tuple(TEXTURE_FORMATS))


def _step(r: _Reader, v, path: str) -> Step:
    r.obj(v, path, ("shader", "reads", "writes", "uniforms", "grid", "label", "node"), ("when",))
    uniforms = []
    for i, u in enumerate(r.list(v["uniforms"], f"{path}.uniforms")):
        u = r.list(u, f"{path}.uniforms[{i}]", 3)
        uniforms.append(Uniform(r.str(u[0], f"{path}.uniforms[{i}][0]", max_len=64),
                                r.str(u[1], f"{path}.uniforms[{i}][1]", tuple(UNIFORM_RANGES)),
                                r.dim(u[2], f"{path}.uniforms[{i}][2]")))
    if len({u.name for u in uniforms}) != len(uniforms):
        r.fail(f"{path}.uniforms", "names repeat")
    when = None
    if "when" in v:
        w = r.list(v["when"], f"{path}.when", 3)
        when = When(r.str(w[0], f"{path}.when[0]", ("eq", "ne")), r.dim(w[1], f"{path}.when[1]"),
                    r.int(w[2], f"{path}.when[2]", -MAX_INT, MAX_INT))
    node = v["node"]
    if node is not None and not isinstance(node, str):
        node = r.int(node, f"{path}.node")
    return Step(
        shader=r.int(v["shader"], f"{path}.shader"),
        reads=tuple(r.int(t, f"{path}.reads[{i}]") for i, t in enumerate(r.list(v["reads"], f"{path}.reads"))),
        writes=tuple(r.int(t, f"{path}.writes[{i}]") for i, t in enumerate(r.list(v["writes"], f"{path}.writes"))),
        uniforms=tuple(uniforms),
        grid=tuple(r.dim(g, f"{path}.grid[{i}]") for i, g in enumerate(r.list(v["grid"], f"{path}.grid", 3))),
        label=r.str(v["label"], f"{path}.label"),
        node=node if not isinstance(node, str) else r.str(node, f"{path}.node"),
        when=when,
    )


def _range(r: _Reader, v, path: str) -> tuple[int, int]:
    lo, hi = (r.int(x, f"{path}[{i}]", 0, 2**31 - 1) for i, x in enumerate(r.list(v, path, 2)))
    if lo > hi:
        r.fail(path, f"step range [{lo}, {hi}) ends before it starts")
    return lo, hi


def _scalar(r: _Reader, v, path: str, optional: bool = False) -> Scalar | None:
    if v is None and optional:
        return None
    if isinstance(v, dict) and "dim" in v:
        r.obj(v, path, ("dim",))
        return Scalar(dim=r.dim(v["dim"], f"{path}.dim"))
    r.obj(v, path, ("tensor",))
    return Scalar(tensor=r.int(v["tensor"], f"{path}.tensor"))


def _control(r: _Reader, v, path: str):
    """One control entry (runtime/control_flow.py): an If, a loop (Loop/Scan) or a data-dependent count."""
    kind = r.str(v.get("kind") if isinstance(v, dict) else v, f"{path}.kind", ("if", "loop", "count"))
    if kind == "if":
        r.obj(v, path, ("kind", "cond", "branches"))
        branches = r.list(v["branches"], f"{path}.branches", 2)
        return IfEntry(kind, _scalar(r, v["cond"], f"{path}.cond"),
                       tuple(_range(r, b, f"{path}.branches[{i}]") for i, b in enumerate(branches)))
    if kind == "loop":
        r.obj(v, path, ("kind", "body", "iter", "count", "trip", "cond", "cond_out", "bound"))
        return LoopEntry(kind, _range(r, v["body"], f"{path}.body"), r.dim(r.str(v["iter"], f"{path}.iter"),
                                                                          f"{path}.iter"),
                         None if v["count"] is None else r.dim(r.str(v["count"], f"{path}.count"), f"{path}.count"),
                         *(_scalar(r, v[k], f"{path}.{k}", optional=True) for k in ("trip", "cond", "cond_out")),
                         r.int(v["bound"], f"{path}.bound", 1, 2**31 - 1))
    r.obj(v, path, ("kind", "at", "tensor", "dim", "bound"))
    return CountEntry(kind, r.int(v["at"], f"{path}.at"), r.int(v["tensor"], f"{path}.tensor"),
                      r.dim(r.str(v["dim"], f"{path}.dim"), f"{path}.dim"), r.int(v["bound"], f"{path}.bound", 0, 2**31 - 1))


def _placement(r: _Reader, v, path: str) -> Placement:
    r.obj(v, path, ("node", "op", "where", "dispatches", "elements"))
    return Placement(r.int(v["node"], f"{path}.node"), r.str(v["op"], f"{path}.op"),
                     r.str(v["where"], f"{path}.where"), r.int(v["dispatches"], f"{path}.dispatches"),
                     r.strs(v["elements"], f"{path}.elements", unique=False))


def _pass(r: _Reader, v, path: str) -> Pass:
    r.obj(v, path, ("name", "nodes_before", "nodes_after", "seconds"))
    return Pass(r.str(v["name"], f"{path}.name"), r.int(v["nodes_before"], f"{path}.nodes_before"),
                r.int(v["nodes_after"], f"{path}.nodes_after"), r.number(v["seconds"], f"{path}.seconds"))
