"""The manifest as a typed schema: standard-library dataclasses that the builder checks what it writes against
and the runtime checks what it loads against. Standard library only (the browser runs it too).

``parse_manifest(obj, where)`` (format/manifest.py) turns the JSON object into a :class:`Manifest` or raises one
WebinferError naming the field (``programs[0].steps[3].reads[1]``) and what is wrong with it. It checks every field's type (a bool is
not an int, unknown keys are refused), every index against the table it points into, every weight's chunks
against its dtype, shape and shards (inside the shard, covering the tensor exactly once), every file path
against the artifact's folders, every dim expression's names against ``dims``, every alias for cycles, and each
program's steps (bindings of GPU tensors only, never writing a weight or an input, read/write sets disjoint),
outputs, weights and shader count. What needs a file's bytes (hashes, the shader's bindings and uniforms:
``check_step_shader``) is checked where the file is read (artifact.py); what needs the bound dims (sizes,
uniform ranges, division by zero) where a plan is made (runtime/session.py, with format/steps.py). Reading the
fields is format/fields.py, the cross-field rules format/checks.py. ``Manifest.to_json`` gives the
object back, so a round trip proves the schema names every field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields

from .blocks import BLOCKS, Audio, Classify, Detect, Preprocess, Segment, Seq2Seq
from .output_formats import OutputFormat

FORMAT = "webinfer-artifact"
VERSION = 2
KINDS = ("input", "weight", "temp", "host", "state")
GPU_KINDS = ("input", "weight", "temp", "state")  # what a step may bind (a host value never reaches the GPU)
UNIFORM_RANGES = {"u32": (0, 2**32 - 1), "i32": (-(2**31), 2**31 - 1), "f32": None}
DIM_OPS = {"+": None, "*": None, "//": 2, "%": 2, "max": 2, "min": 2}  # operator -> arity (None: 1 or more)
MAX_BYTES = 2**32  # the largest GPU buffer any adapter grants (WebGPU's maxBufferSize is a u64, in practice < 4 GiB)
MAX_INT = 2**53  # integers beyond this are not exact in JavaScript, which reads the same manifest
SHARD_BYTES = 16 * 1024 * 1024  # weight shards are at most this big
CHUNK_ALIGN = 256  # each weight starts at a multiple of this inside its shard
_MAX_DEPTH = 64  # a reader's recursion bound: dims.py keeps real networks' dim expressions far below it
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_FOLDERS = {"shaders": "shaders", "shards": "weights", "assets": "assets"}
_FILE_NAME = re.compile(r"^(shaders|weights|assets)/(?!\.\.?$)[A-Za-z0-9_.-]+$")


# -- the schema --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FileEntry:
    file: str
    bytes: int
    sha256: str


@dataclass(frozen=True)
class Chunk:
    """``nbytes`` bytes at ``offset`` in shard ``shard`` go to byte ``dst`` of the tensor."""

    shard: int
    offset: int
    nbytes: int
    dst: int


@dataclass(frozen=True)
class Tensor:
    dtype: str
    shape: tuple  # dims in JSON form: int, name, or an expression list
    kind: str
    alias: int | None
    capacity: tuple | None = None  # states: the shape of the buffer (bound dims at their maximum)
    chunks: tuple[Chunk, ...] | None = None  # weights: where the bytes are
    offset: object = None  # a view's first element in its alias's buffer (a dim expression): a band of a big input


@dataclass(frozen=True)
class Named:
    name: str
    tensor: int


@dataclass(frozen=True)
class Uniform:
    name: str
    type: str
    value: object  # a dim expression


@dataclass(frozen=True)
class When:
    op: str  # "eq" | "ne"
    dim: object
    value: int


@dataclass(frozen=True)
class Step:
    shader: int
    reads: tuple[int, ...]
    writes: tuple[int, ...]
    uniforms: tuple[Uniform, ...]
    grid: tuple
    label: str
    node: int | str | None
    when: When | None = None


@dataclass(frozen=True)
class Placement:
    node: int
    op: str
    where: str
    dispatches: int
    elements: tuple[str, ...]


@dataclass(frozen=True)
class Requires:
    features: tuple[str, ...]
    limits: dict


@dataclass(frozen=True)
class Scalar:
    """How the runtime gets a condition or trip count: a dim expression, or one element of a tensor."""

    dim: object = None
    tensor: int | None = None


@dataclass(frozen=True)
class IfEntry:
    """An If: steps ``branches[0]`` run when ``cond`` is true, else ``branches[1]`` ([start, end) ranges, adjacent)."""

    kind: str
    cond: Scalar
    branches: tuple[tuple[int, int], tuple[int, int]]


@dataclass(frozen=True)
class LoopEntry:
    """A Loop/Scan: steps ``body`` run per iteration (dim ``iter``), at most ``bound`` times; ``count`` names the
    dim that holds the number of iterations afterwards (None: known at build time)."""

    kind: str
    body: tuple[int, int]
    iter: str
    count: str | None
    trip: Scalar | None
    cond: Scalar | None
    cond_out: Scalar | None
    bound: int


@dataclass(frozen=True)
class CountEntry:
    """A data-dependent size: before step ``at`` the runtime reads element 0 of ``tensor`` into dim ``dim``."""

    kind: str
    at: int
    tensor: int
    dim: str
    bound: int


@dataclass(frozen=True)
class Guard:
    """A build assumption on the dims (a slice start inside its axis, a --dim lower bound): ``expr`` >= 0."""

    expr: object
    why: str


@dataclass(frozen=True)
class BranchGuard:
    """A build assumption made inside an If branch: ``expr`` >= 0 when the steps ``steps`` (one branch's
    [start, end) range of a control entry) run; checked then, not on runs that take the other branch."""

    steps: tuple[int, int]
    expr: object
    why: str


@dataclass(frozen=True)
class Program:
    kernel_class: str
    adapter_types: tuple[str, ...]
    requires: Requires
    steps: tuple[Step, ...]
    outputs: tuple[Named, ...]
    weights: tuple[int, ...]
    shaders: int
    control: tuple  # IfEntry | LoopEntry | CountEntry, in the order the builder closed them
    guards: tuple[Guard, ...]
    placement: tuple[Placement, ...]
    textures: tuple[tuple[int, str], ...] = ()  # (weight, texel format) bound as textures (format/textures.py)
    branch_guards: tuple[BranchGuard, ...] | None = None  # guards of If branches (codegen/guard_scopes.py)


@dataclass(frozen=True)
class Pass:
    name: str
    nodes_before: int
    nodes_after: int
    seconds: float


@dataclass(frozen=True)
class Manifest:
    format: str
    version: int
    producer: str
    options: dict
    dims: tuple[str, ...]
    inputs: tuple[Named, ...]
    states: tuple[Named, ...]
    bounds: dict
    index_bounds: dict  # input -> rows of the table its values index
    tensors: tuple[Tensor, ...]
    programs: tuple[Program, ...]
    groups: dict  # {"inputs"|"outputs": {name: flat name | [flat names] | None}} (codegen/nested.py)
    passes: tuple[Pass, ...]
    shaders: tuple[FileEntry, ...]
    shards: tuple[FileEntry, ...]
    assets: dict  # relative path -> FileEntry
    # the model-level blocks (format/blocks.py)
    preprocess: Preprocess | None = None  # the image prologue (graph/prepost.py)
    classify: Classify | None = None  # the classification epilogue: outputs ranked, labels asset
    detect: Detect | None = None  # the detection epilogue (graph/vision_epilogues.py): boxes, count, labels asset
    segment: Segment | None = None  # the mask epilogue: a class map, or a matte and the cut-out image
    audio: Audio | None = None  # the audio prologue (graph/audio_prologue.py; format/audio.py)
    seq2seq: Seq2Seq | None = None  # an encoder-decoder's join (format/seq2seq.py)
    output_formats: tuple[OutputFormat, ...] | None = None  # classic-ML labels and ZipMap (format/output_formats.py)

    def to_json(self) -> dict:
        return _to_json(self)

    def base(self, tid: int) -> int:
        """The tensor whose buffer ``tid`` is a view of (itself when it is no alias)."""
        while self.tensors[tid].alias is not None:
            tid = self.tensors[tid].alias
        return tid


_OPTIONAL = ("capacity", "chunks", "offset", "when", "preprocess", "classify", "branch_guards", "detect", "segment",
             "audio", "seq2seq", "output_formats")  # keys left out when absent
_JSON_NAMES = {"kernel_class": "class"}  # field -> JSON key where Python needs another name
_POSITIONAL = (Chunk, Uniform, When, Guard, BranchGuard)  # written as JSON lists


def to_json(value):
    """A typed manifest object (the manifest, a program, a block, ...) as the JSON the builder writes."""
    return _to_json(value)


def _to_json(v):
    if isinstance(v, _POSITIONAL):
        return [_to_json(getattr(v, f.name)) for f in fields(v)]
    if hasattr(v, "__dataclass_fields__"):
        out = {}
        for f in fields(v):
            value = getattr(v, f.name)
            if value is None and (f.name in _OPTIONAL or isinstance(v, (Scalar, *BLOCKS))):
                continue  # optional keys are left out, as the builder writes them
            out[_JSON_NAMES.get(f.name, f.name)] = _to_json(value)
        return out
    if isinstance(v, (list, tuple)):
        return [_to_json(x) for x in v]
    if isinstance(v, dict):
        return {k: _to_json(x) for k, x in v.items()}
    return v


class WeightPacker:
    """Where weights go in the shards: in table order, each at the next multiple of CHUNK_ALIGN, split across
    shards of at most SHARD_BYTES. The writer places bytes with it; the validator recomputes it, so every
    chunk's shard and offset are fixed by the weights' sizes and nothing can point at another weight's bytes."""

    def __init__(self, shard_bytes: int = SHARD_BYTES):
        self.shard_bytes = shard_bytes
        self.sizes = [0]  # bytes in each shard so far

    def add(self, nbytes: int) -> list[list[int]]:
        """Chunks [shard, offset, nbytes, dst] for the next weight of ``nbytes`` bytes."""
        chunks, done = [], 0
        while done < nbytes or not chunks:
            used = self.sizes[-1]
            start = used + (-used) % CHUNK_ALIGN
            if start >= self.shard_bytes:
                self.sizes.append(0)
                continue
            piece = min(self.shard_bytes - start, nbytes - done)
            chunks.append([len(self.sizes) - 1, start, piece, done])
            self.sizes[-1] = start + piece
            done += piece
            if not nbytes:
                break
        return chunks
