"""Lowered programs -> the manifest (format version 2): one tensor table shared by one program per kernel class.

Each kernel class is lowered separately (its own Program); here they become one table: graph inputs and KV-cache
states are matched by name, weights by their bytes (so a weight both classes read is stored and uploaded once),
and everything else (temporaries, host values) belongs to the program that made it. Each program lists its
steps, outputs, placement, the weights it reads, what it needs from a device (``requires``) and the adapter
types it is tuned for; the runtime picks one at session start (runtime/select.py).
"""

from __future__ import annotations

import hashlib

import numpy as np

from .. import dims as D
from ..artifact import ArtifactWriter
from ..dtypes import I32_MAX, I32_MIN, gpu_nbytes
from ..dtypes import dtype as get_dtype
from ..errors import WebinferError
from ..options import LIMITS, BuildOptions, KernelClass
from . import packed
from .program import Program, Step, Tensor

# What a limits tier means in WebGPU's limit names (a program needs a device that grants at least these).
_LIMIT_NAMES = {
    "max_storage_buffers": "max-storage-buffers-per-shader-stage",
    "max_invocations": "max-compute-invocations-per-workgroup",
    "max_workgroup_bytes": "max-compute-workgroup-storage-size",
}


def gpu_bytes(value: np.ndarray, what: str) -> bytes | memoryview:
    """A constant in GPU storage form (32 bits per element, int64 range-checked; packed types packed). A
    contiguous float32 or uint32 array is handed over as a view of its own bytes (no copy of a big weight)."""
    if value.dtype in (np.float32, np.uint32) and value.flags.c_contiguous and value.size:
        return memoryview(value).cast("B")
    if get_dtype(str(value.dtype)).packed:
        return packed.pack(value)
    storage = get_dtype(str(value.dtype)).storage
    if storage == "f32":
        return np.ascontiguousarray(value, dtype=np.float32).tobytes()
    if value.dtype == np.uint32:  # packed words (quantized weights) use all 32 bits
        return np.ascontiguousarray(value).tobytes()
    if value.dtype.kind in "iu" and value.size and (value.min() < I32_MIN or value.max() > I32_MAX):
        raise WebinferError(f"{what}: integer constant outside the int32 range used on the GPU")
    return np.ascontiguousarray(value, dtype=np.int32 if storage == "i32" else np.uint32).tobytes()


class _Table:
    """The shared tensor table being filled, program by program."""

    def __init__(self, writer: ArtifactWriter):
        self.writer = writer
        self.entries: list[dict] = []
        self.shared: dict[tuple, int] = {}  # (kind, name) or (weight digest, dtype, shape) -> table id
        self.by_array: dict[int, tuple] = {}  # id(numpy value) -> weight key: most weights are the same array

    def add_program(self, program: Program) -> dict[int, int]:
        """Table ids of one program's tensors (its ``Tensor.id`` -> manifest id)."""
        ids: dict[int, int] = {}
        fresh: list[tuple[Tensor, dict]] = []
        for t in program.tensors:
            key, data = self._key(t)
            if key is not None and key in self.shared:
                ids[t.id] = self.shared[key]
                continue
            entry = {"dtype": t.dtype, "shape": [D.to_json(d) for d in t.shape], "kind": t.kind, "alias": None}
            fresh.append((t, entry))
            if t.capacity is not None:
                entry["capacity"] = list(t.capacity)
            if not (isinstance(t.offset, int) and t.offset == 0):
                entry["offset"] = D.to_json(t.offset)
            if t.kind == "weight":
                entry["chunks"] = self.writer.add_weight(data)
            elif t.kind == "const" or t.sym is not None:
                entry["kind"] = "host"
            ids[t.id] = len(self.entries)
            self.entries.append(entry)
            if key is not None:
                self.shared[key] = ids[t.id]
        for t, entry in fresh:  # an alias may name a later tensor (a host value materialized on the GPU)
            if t.alias is not None:
                entry["alias"] = ids[t.alias.id]
        return ids

    def _key(self, t: Tensor) -> tuple[tuple | None, bytes | None]:
        if t.kind in ("input", "state") and t.name:
            return (t.kind, t.name), None
        if t.kind != "weight":
            return None, None
        key = self.by_array.get(id(t.value))
        if key is not None and key in self.shared:
            return key, None
        data = gpu_bytes(t.value, f"constant {t.name or t.id}")
        key = ("weight", hashlib.blake2b(data, digest_size=16).hexdigest(), t.dtype,
               tuple(D.to_json(d) for d in t.shape))
        self.by_array[id(t.value)] = key
        return key, data


def _step(s: Step, ids: dict[int, int], writer: ArtifactWriter) -> dict:
    return {
        "shader": writer.add_shader(s.shader),
        "reads": [ids[t.id] for t in s.reads],
        "writes": [ids[t.id] for t in s.writes],
        "uniforms": [[n, typ, D.to_json(v)] for n, typ, v in s.uniforms],
        "grid": [D.to_json(g) for g in s.grid],
        "label": s.label,
        "node": s.node,
        **({"when": [s.when[0], D.to_json(s.when[1]), int(s.when[2])]} if s.when else {}),
    }


def _program_entry(kclass: KernelClass, program: Program, ids: dict[int, int], table: _Table,
                   options: BuildOptions) -> dict:
    steps = [_step(s, ids, table.writer) for s in program.steps]
    outputs = [{"name": n, "tensor": ids[t.id]} for n, t in program.outputs]
    weights = set()  # what the steps read, and outputs that are constants
    for tid in [r for s in steps for r in s["reads"]] + [o["tensor"] for o in outputs]:
        while table.entries[tid]["alias"] is not None:
            tid = table.entries[tid]["alias"]
        if table.entries[tid]["kind"] == "weight":
            weights.add(tid)
    limits = {_LIMIT_NAMES[k]: LIMITS[options.limits][k] for k in _LIMIT_NAMES}
    binding, buffer = _largest_binding(steps, table, {tid for tid, _ in _textures(program, ids)})
    if buffer:  # a device that cannot bind the largest weight or state is refused before any shard is fetched
        limits.update({"max-storage-buffer-binding-size": binding, "max-buffer-size": buffer})
    return {
        "class": kclass.name,
        "adapter_types": list(kclass.adapter_types),
        "requires": {"features": list(kclass.features),
                     "limits": limits},
        "steps": steps,
        "outputs": outputs,
        "weights": sorted(weights),
        "textures": _textures(program, ids),
        "shaders": len({s["shader"] for s in steps}),
        "control": _remap_tensors(program.control, ids),  # If/Loop/Scan step ranges (codegen/kernels/control_flow.py)
        "guards": [[D.to_json(e), why] for e, why in program.guards],  # shapes must keep expr >= 0 (checked per run)
        "placement": program.placement,
        **({"branch_guards": [[list(r), D.to_json(e), why] for r, e, why in program.branch_guards]}
           if program.branch_guards else {}),  # checked when that If branch runs
    }


def _largest_binding(steps: list[dict], table: _Table, textures: set[int]) -> tuple[int, int]:
    """Bytes of the largest binding and of the largest buffer of static size (weights, states at capacity,
    fixed temporaries) the steps bind as storage: what a device must grant. A band of a big input (a view at an
    offset) binds only its own part of its buffer. Tensors sized by symbolic dims are checked when a run sizes
    them (runtime/session.py)."""
    largest_binding = largest_buffer = 0
    for tid in {t for s in steps for t in s["reads"] + s["writes"]}:
        if tid in textures:
            continue
        own = table.entries[tid]
        while table.entries[tid]["alias"] is not None:
            tid = table.entries[tid]["alias"]
        entry = table.entries[tid]
        shape = entry.get("capacity") or entry["shape"]
        if all(isinstance(d, int) for d in shape):
            size = gpu_nbytes(entry["dtype"], int(np.prod(shape, dtype=np.int64)))
            largest_buffer = max(largest_buffer, size)
            if "offset" not in own:
                largest_binding = max(largest_binding, size)
        if "offset" in own and all(isinstance(d, int) for d in own["shape"]):
            largest_binding = max(largest_binding, gpu_nbytes(own["dtype"], int(np.prod(own["shape"], dtype=np.int64))))
    return largest_binding, largest_buffer


def _textures(program: Program, ids: dict[int, int]) -> list[list]:
    """[table id, texel format] of the weights the program binds as textures (the class's weight_textures).
    The runtime makes each one a texture, so every step that reads it must bind it so."""
    chosen: dict[int, str] = {}
    for s in program.steps:
        for tid, fmt in s.textures.items():
            if chosen.setdefault(ids[tid], fmt) != fmt:
                raise WebinferError(f"internal error: weight {ids[tid]} is bound as {chosen[ids[tid]]} and {fmt}")
    for s in program.steps:
        for t in s.reads:
            if ids[t.base.id] in chosen and t.id not in s.textures:
                raise WebinferError(f"internal error: {s.label} reads weight {ids[t.id]} as a buffer, other steps "
                                    f"as a texture")
    return [[tid, fmt] for tid, fmt in sorted(chosen.items())]


def _remap_tensors(value, ids: dict[int, int]):
    """Control entries name tensors as {"tensor": id}: the program's ids -> the table's."""
    if isinstance(value, dict):
        return {k: (ids[v] if k == "tensor" and isinstance(v, int) else _remap_tensors(v, ids)) for k, v in value.items()}
    if isinstance(value, list):
        return [_remap_tensors(v, ids) for v in value]
    return value


def write_artifact(programs: list[tuple[KernelClass, Program]], out_dir: str, options: BuildOptions,
                   passes: list | None = None, assets: dict[str, bytes] | None = None, producer: str = "",
                   extra: dict | None = None) -> dict:
    """Write the artifact directory for these (class, program) pairs, in the artifact's order of preference.
    ``extra``: model-level fields every program shares (the image prologue ``preprocess``, the ``classify``
    epilogue: graph/prepost.py)."""
    writer = ArtifactWriter(out_dir)
    for name, data in (assets or {}).items():
        writer.add_asset(name, data)
    table = _Table(writer)
    entries = []
    first_ids = None
    for kclass, program in programs:
        ids = table.add_program(program)
        first_ids = first_ids or ids
        entries.append(_program_entry(kclass, program, ids, table, options))
    first = programs[0][1]
    manifest = {
        "producer": producer,
        "options": options.to_json(),
        "dims": first.dims,
        "inputs": [{"name": n, "tensor": first_ids[t.id]} for n, t in first.inputs],
        "states": [{"name": n, "tensor": first_ids[t.id]} for n, t in first.states],
        "bounds": {k: v for _, p in programs for k, v in p.bounds.items()},  # KV cache lengths, loop counts
        "index_bounds": first.index_bounds,  # graph inputs that index a table: rows it has (runtime checks)
        "tensors": table.entries,
        "programs": entries,
        "groups": first.groups,  # sequence/optional inputs and outputs -> flat names (codegen/nested.py)
        "passes": passes or [],
        **(extra or {}),
    }
    return writer.write(manifest)
