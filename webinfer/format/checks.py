"""Cross-field rules of the manifest (format/schema.py): indices in range, sizes consistent with dtype and shape,
chunks inside their shards and covering their tensor once, aliases without cycles, steps binding only GPU
tensors, programs' outputs/weights/shader counts as their steps say; and a shader's bindings against its step.
Standard library only.
"""

from __future__ import annotations

import re

from ..dtypes import gpu_nbytes
from ..errors import WebinferError
from .schema import (
    _FOLDERS,
    GPU_KINDS,
    MAX_BYTES,
    Chunk,
    CountEntry,
    IfEntry,
    LoopEntry,
    Manifest,
    Program,
    Step,
    Tensor,
    WeightPacker,
)
from .textures import FORMATS as TEXTURE_FORMATS
from .textures import texture_size


def check_consistency(m: Manifest, where: str) -> None:
    def fail(path: str, message: str):
        raise WebinferError(f"{where}: manifest {path}: {message}")

    _check_files(m, fail)
    n = len(m.tensors)
    for i, t in enumerate(m.tensors):
        _check_tensor(m, i, t, fail)
    _check_layout(m, fail)
    bases = [_base(m, i, fail) for i in range(n)]
    for group in ("inputs", "states"):
        kind = group[:-1]
        seen = set()
        for i, io in enumerate(getattr(m, group)):
            if not 0 <= io.tensor < n or m.tensors[io.tensor].kind != kind:
                fail(f"{group}[{i}].tensor", f"{io.tensor} is not a tensor of kind {kind!r}")
            if io.tensor in seen:
                fail(f"{group}[{i}].tensor", f"tensor {io.tensor} is named twice")
            seen.add(io.tensor)
    if {io.name for io in m.inputs} & {io.name for io in m.states}:
        fail("states", "a state has the name of an input")
    if not m.programs:
        fail("programs", "the artifact has no program")
    if len({p.kernel_class for p in m.programs}) != len(m.programs):
        fail("programs", "two programs have the same kernel class")
    for k, p in enumerate(m.programs):
        _check_program(m, p, f"programs[{k}]", bases, fail)
    _check_vision(m, fail)


def _check_vision(m: Manifest, fail) -> None:
    """The image prologue's input and the epilogues' outputs and labels exist (runtime/vision.py,
    runtime/vision_tasks.py)."""
    if m.preprocess is not None and m.preprocess.image not in {io.name for io in m.inputs}:
        fail("preprocess.image", f"{m.preprocess.image[:40]!r} is not an input")
    if m.audio is not None and m.audio.audio not in {io.name for io in m.inputs}:
        fail("audio.audio", f"{m.audio.audio[:40]!r} is not an input")
    for what, entry, keys in (("classify", m.classify, ("scores", "indices")),
                              ("detect", m.detect, ("detections", "count")),
                              ("segment", m.segment, ("segments", "matte", "cutout"))):
        if entry is None:
            continue
        if what == "segment" and m.preprocess is None:
            fail(what, "a mask epilogue needs the image prologue (preprocess)")
        for key in keys:
            for k, p in enumerate(m.programs):
                name = getattr(entry, key)
                if name is not None and name not in {o.name for o in p.outputs}:
                    fail(f"{what}.{key}", f"{name[:40]!r} is not an output of programs[{k}]")
        labels = entry.labels
        if labels is not None and f"{_FOLDERS['assets']}/{labels}" not in m.assets:
            fail(f"{what}.labels", f"{labels[:40]!r} is not one of the artifact's assets")


def _check_files(m: Manifest, fail) -> None:
    for group in ("shaders", "shards"):
        names = [e.file for e in getattr(m, group)]
        if len(set(names)) != len(names):
            fail(group, "a file is listed twice")
    for rel, e in m.assets.items():
        if e.file != rel:
            fail(f"assets.{rel[:40]}", f"names the file {e.file!r}")
        if not rel.startswith(_FOLDERS["assets"] + "/"):
            fail(f"assets.{rel[:40]}", "is not in assets/")


def _static_numel(shape) -> int | None:
    n = 1
    for d in shape:
        if not isinstance(d, int):
            return None
        n *= d
    return n


def _check_tensor(m: Manifest, i: int, t: Tensor, fail) -> None:
    path = f"tensors[{i}]"
    numel = _static_numel(t.shape)
    if numel is not None and gpu_nbytes(t.dtype, numel) > MAX_BYTES:
        fail(f"{path}.shape", f"{numel} elements exceed any GPU buffer")
    if t.alias is not None and not 0 <= t.alias < len(m.tensors):
        fail(f"{path}.alias", f"tensor {t.alias} does not exist ({len(m.tensors)} tensors)")
    if (t.kind == "weight") != (t.chunks is not None):
        fail(path, "a weight needs chunks, and only a weight has them")
    if (t.kind == "state") != (t.capacity is not None):
        fail(path, "a state needs a capacity, and only a state has one")
    if t.offset is not None and t.alias is None:
        fail(f"{path}.offset", "only a view (a tensor with an alias) starts at an offset")
    if t.kind in ("weight", "state", "input") and t.alias is not None:
        fail(f"{path}.alias", f"a tensor of kind {t.kind!r} owns its buffer")
    if t.capacity is not None:
        if len(t.capacity) != len(t.shape):
            fail(f"{path}.capacity", f"rank {len(t.capacity)} differs from the shape's {len(t.shape)}")
        for a, (d, c) in enumerate(zip(t.shape, t.capacity)):
            if isinstance(d, int) and d != c:
                fail(f"{path}.capacity[{a}]", f"{c} differs from the fixed dim {d}")
        if gpu_nbytes(t.dtype, _static_numel(t.capacity)) > MAX_BYTES:
            fail(f"{path}.capacity", "exceeds any GPU buffer")
    if t.chunks is not None:
        if numel is None:
            fail(f"{path}.shape", "a weight's shape must be fixed")
        _check_chunks(m, path, t.chunks, gpu_nbytes(t.dtype, numel), fail)


def _check_chunks(m: Manifest, path: str, chunks, nbytes: int, fail) -> None:
    """Each chunk lies inside its shard; together they cover the tensor's bytes exactly once, in order."""
    cursor = 0
    for k, c in enumerate(chunks):
        where = f"{path}.chunks[{k}]"
        if c.shard >= len(m.shards):
            fail(where, f"shard {c.shard} does not exist ({len(m.shards)} shards)")
        if c.offset + c.nbytes > m.shards[c.shard].bytes:
            fail(where, f"bytes {c.offset}..{c.offset + c.nbytes} lie past the end of {m.shards[c.shard].file} "
                        f"({m.shards[c.shard].bytes} bytes)")
        if c.dst != cursor:
            fail(where, f"starts at byte {c.dst} of the tensor, expected {cursor} (chunks must cover it in order)")
        cursor += c.nbytes
    if cursor != nbytes:
        fail(f"{path}.chunks", f"hold {cursor} bytes, the tensor's dtype and shape need {nbytes}")


def _check_layout(m: Manifest, fail) -> None:
    """Weights sit in the shards exactly where the writer puts them (manifest.WeightPacker), and each shard is
    as long as what it holds: no chunk can point at another weight's bytes or at padding."""
    packer = WeightPacker()
    for i, t in enumerate(m.tensors):
        if t.chunks is None:
            continue
        want = [Chunk(*c) for c in packer.add(sum(c.nbytes for c in t.chunks))]
        for k, (c, w) in enumerate(zip(t.chunks, want)):
            if c != w:
                fail(f"tensors[{i}].chunks[{k}]", f"is {list(vars(c).values())}, the weights before it put it "
                                                  f"at {list(vars(w).values())}")
        if len(t.chunks) != len(want):
            fail(f"tensors[{i}].chunks", f"{len(t.chunks)} chunks where the layout has {len(want)}")
    if [s.bytes for s in m.shards] != packer.sizes:
        fail("shards", f"sizes {[s.bytes for s in m.shards][:6]} differ from what the weights fill "
                       f"{packer.sizes[:6]}")


def _base(m: Manifest, i: int, fail) -> int:
    seen = {i}
    while m.tensors[i].alias is not None:
        i = m.tensors[i].alias
        if i in seen:
            fail(f"tensors[{min(seen)}].alias", "aliases form a cycle")
        seen.add(i)
    return i


def _check_program(m: Manifest, p: Program, path: str, bases: list[int], fail) -> None:
    n = len(m.tensors)

    def gpu_tensor(tid: int, where: str) -> int:
        if not 0 <= tid < n:
            fail(where, f"tensor {tid} does not exist ({n} tensors)")
        base = bases[tid]
        if m.tensors[base].kind not in GPU_KINDS:
            fail(where, f"tensor {tid} is a host value, not a GPU buffer")
        if tid != base and _static_numel(m.tensors[tid].shape) is not None:
            base_numel = _static_numel(m.tensors[base].shape if m.tensors[base].capacity is None
                                       else m.tensors[base].capacity)
            if base_numel is not None and _static_numel(m.tensors[tid].shape) > base_numel:
                fail(where, f"tensor {tid} is a view larger than the tensor {base} it views")
        return base

    used_weights, used_shaders = set(), set()
    written: dict[int, set] = {}  # temp (base) -> the conditions under which a step has written it
    for k, s in enumerate(p.steps):
        sp = f"{path}.steps[{k}]"
        if not 0 <= s.shader < len(m.shaders):
            fail(f"{sp}.shader", f"shader {s.shader} does not exist ({len(m.shaders)} shaders)")
        used_shaders.add(s.shader)
        reads = [gpu_tensor(t, f"{sp}.reads[{i}]") for i, t in enumerate(s.reads)]
        writes = [gpu_tensor(t, f"{sp}.writes[{i}]") for i, t in enumerate(s.writes)]
        for i, b in enumerate(writes):
            if m.tensors[b].kind in ("weight", "input"):
                fail(f"{sp}.writes[{i}]", f"a step may not write the {m.tensors[b].kind} tensor {s.writes[i]}")
        if len(set(writes)) != len(writes) or set(reads) & set(writes):
            fail(sp, "binds one buffer twice for writing, or for reading and writing")
        used_weights |= {b for b in reads if m.tensors[b].kind == "weight"}
        cond = _condition(s)
        for i, b in enumerate(reads):
            if _needs_writer(m.tensors[b]) and not _covers(written.get(b, set()), cond):
                fail(f"{sp}.reads[{i}]", f"tensor {s.reads[i]} is read before a step writes it")
        for b in writes:
            written.setdefault(b, set()).add(cond)
    names = set()
    for i, o in enumerate(p.outputs):
        b = gpu_tensor(o.tensor, f"{path}.outputs[{i}].tensor")
        if _needs_writer(m.tensors[b]) and not _covers(written.get(b, set()), None):
            fail(f"{path}.outputs[{i}]", f"tensor {o.tensor} is not written by the steps")
        if m.tensors[b].kind == "weight":
            used_weights.add(b)
        names.add(o.name)
    if not p.outputs:
        fail(f"{path}.outputs", "a program has at least one output")
    if len(set(p.weights)) != len(p.weights) or set(p.weights) != used_weights:
        fail(f"{path}.weights", f"lists {sorted(p.weights)[:8]}, the steps and outputs read the weights "
                                f"{sorted(used_weights)[:8]}")
    if p.shaders != len(used_shaders):
        fail(f"{path}.shaders", f"says {p.shaders}, the steps use {len(used_shaders)}")
    _check_textures(m, p, path, gpu_tensor, fail)
    _check_control(m, p, path, gpu_tensor, fail)


def _check_textures(m: Manifest, p: Program, path: str, gpu_tensor, fail) -> None:
    """Weights bound as textures: the program's own, once each, of the format's scalar type and small enough
    for one texture (format/textures.py), and never a program output (a texture cannot be read back)."""
    seen = set()
    outputs = {o.tensor for o in p.outputs}
    for i, (tid, fmt) in enumerate(p.textures):
        where = f"{path}.textures[{i}]"
        if tid in seen or tid not in p.weights or tid in outputs:
            fail(where, f"tensor {tid} is not a weight the program reads (once, not as an output)")
        seen.add(tid)
        t = m.tensors[tid]
        numel = _static_numel(t.shape)
        if t.dtype != {"u32": "uint32", "f32": "float32"}[TEXTURE_FORMATS[fmt][1]] or numel is None \
                or texture_size(4 * numel, fmt) is None:
            fail(where, f"tensor {tid} ({t.dtype}{list(t.shape)[:4]}) cannot be a {fmt} texture")
    for k, step in enumerate(p.steps):
        for i, tid in enumerate(step.reads):
            base = gpu_tensor(tid, f"{path}.steps[{k}].reads[{i}]")
            if base != tid and base in seen:
                fail(f"{path}.steps[{k}].reads[{i}]", f"tensor {tid} views the texture {base}")


def _check_control(m: Manifest, p: Program, path: str, gpu_tensor, fail) -> None:
    """Control entries: step ranges inside the program and properly nested (an entry lies inside one branch of
    an If or is disjoint from it), scalars naming GPU tensors, dims bounded as the entry says."""
    n = len(p.steps)
    spans = []  # (lo, hi, path): every range an entry runs as a unit
    for k, c in enumerate(p.control):
        cp = f"{path}.control[{k}]"
        if isinstance(c, CountEntry):
            if c.at > n:
                fail(f"{cp}.at", f"step {c.at} is past the program's {n} steps")
            gpu_tensor(c.tensor, f"{cp}.tensor")
            if m.bounds.get(c.dim) != c.bound:
                fail(f"{cp}.bound", f"{c.bound} differs from bounds.{c.dim} ({m.bounds.get(c.dim)})")
            continue
        ranges = c.branches if isinstance(c, IfEntry) else (c.body,)
        if isinstance(c, IfEntry) and c.branches[0][1] != c.branches[1][0]:
            fail(f"{cp}.branches", "the else branch must start where the then branch ends")
        for lo, hi in ranges:
            if hi > n:
                fail(cp, f"step range [{lo}, {hi}) is past the program's {n} steps")
        spans += [(lo, hi, cp) for lo, hi in ranges] + [(ranges[0][0], ranges[-1][1], cp)]
        scalars = [("cond", c.cond)] if isinstance(c, IfEntry) else [
            ("trip", c.trip), ("cond", c.cond), ("cond_out", c.cond_out)]
        for key, s in scalars:
            if s is not None and s.tensor is not None:
                gpu_tensor(s.tensor, f"{cp}.{key}.tensor")
        if isinstance(c, LoopEntry) and c.count is not None and m.bounds.get(c.count) != c.bound:
            fail(f"{cp}.bound", f"{c.bound} differs from bounds.{c.count} ({m.bounds.get(c.count)})")
    for a, (lo, hi, pa) in enumerate(spans):
        for lo2, hi2, pb in spans[a + 1:]:
            if lo < lo2 < hi < hi2 or lo2 < lo < hi2 < hi:
                fail(pb, f"its steps overlap those of {pa} without nesting")
    branches = {b for c in p.control if isinstance(c, IfEntry) for b in c.branches}
    for k, g in enumerate(p.branch_guards or ()):
        if g.steps not in branches:
            fail(f"{path}.branch_guards[{k}][0]", f"steps [{g.steps[0]}, {g.steps[1]}) are no If branch's")


def _needs_writer(t: Tensor) -> bool:
    """A temporary holds nothing until a step writes it (unless it has no elements at all)."""
    return t.kind == "temp" and _static_numel(t.shape) != 0


def _condition(s: Step):
    return None if s.when is None else (s.when.op, repr(s.when.dim), s.when.value)


def _covers(conditions: set, wanted) -> bool:
    """Whether writes made under ``conditions`` cover a read under ``wanted`` (None: always): an unconditional
    write, one under the same condition, or both halves of an eq/ne pair (a GEMV step and its GEMM)."""
    if None in conditions or wanted in conditions:
        return True
    return any(c[0] == "eq" and ("ne", c[1], c[2]) in conditions for c in conditions)


_BINDING = re.compile(r"@group\(0\)\s*@binding\((\d+)\)\s*var<([a-z_]+)(?:,\s*([a-z_]+))?>")
_TEXTURE = re.compile(r"@group\(0\)\s*@binding\((\d+)\)\s*var\s+[A-Za-z_][A-Za-z0-9_]*\s*:\s*texture_2d<([a-z0-9]+)>")
_PARAMS = re.compile(r"struct Params\s*\{([^}]*)\}")
_FIELD = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*([a-z0-9<>]+)\s*,?\s*$")


def check_shader_bindings(step: Step, source: str, where: str, textures: dict) -> None:
    """``textures``: the program's weights bound as textures (id -> texel format)."""
    want = ([f"texture_2d<{TEXTURE_FORMATS[textures[t]][1]}>" if t in textures else "read" for t in step.reads]
            + ["read_write"] * len(step.writes) + (["uniform"] if step.uniforms else []))
    got = {}
    for b in _BINDING.finditer(source):
        got[int(b.group(1))] = "uniform" if b.group(2) == "uniform" else b.group(3)
    for b in _TEXTURE.finditer(source):
        got[int(b.group(1))] = f"texture_2d<{b.group(2)}>"
    if [got.get(i) for i in range(len(got))] != want or len(got) != len(want):
        raise WebinferError(f"{where}: the shader's bindings do not match its step "
                            f"({step.label[:60]}: {len(step.reads)} read, {len(step.writes)} written"
                            f"{', a uniform block' if step.uniforms else ''})")
    fields_ = []
    found = _PARAMS.search(source)
    if found:
        for line in found.group(1).splitlines():
            f = _FIELD.match(line)
            if f:
                fields_.append((f.group(1), f.group(2)))
    if fields_ != [(u.name, u.type) for u in step.uniforms]:
        raise WebinferError(f"{where}: the shader's uniform fields do not match its step's uniforms "
                            f"({step.label[:60]})")
