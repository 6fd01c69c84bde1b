"""`webinfer inspect`: describe an ONNX model or an artifact as plain-text tables."""

from __future__ import annotations

import os
from collections import Counter

from . import dims as D
from .errors import WebinferError


def _table(rows, headers) -> str:
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"


def inspect_onnx(path: str) -> str:
    import onnx

    from .graph.importer import load_proto

    model = load_proto(path)
    g = model.graph
    inits = {i.name for i in g.initializer}

    def shape_of(vi):
        if not vi.type.tensor_type.HasField("shape"):
            return "?"
        dims = vi.type.tensor_type.shape.dim
        return "[" + ", ".join(d.dim_param or (str(d.dim_value) if d.HasField("dim_value") else "?") for d in dims) + "]"

    def type_name(tp) -> str:  # a tensor's element type; sequences and maps (ZipMap's output) spelled out
        kind = tp.WhichOneof("value")
        if kind == "sequence_type":
            return f"seq({type_name(tp.sequence_type.elem_type)})"
        if kind == "map_type":
            key = onnx.helper.tensor_dtype_to_np_dtype(tp.map_type.key_type)
            return f"map({'string' if key.kind == 'O' else key.name}, {type_name(tp.map_type.value_type)})"
        if kind != "tensor_type" or not tp.tensor_type.elem_type:
            return "?"
        dt = onnx.helper.tensor_dtype_to_np_dtype(tp.tensor_type.elem_type)
        return "string" if dt.kind == "O" else dt.name

    def dtype_of(vi):
        return type_name(vi.type)

    io = [("input", i.name, dtype_of(i), shape_of(i)) for i in g.input if i.name not in inits]
    io += [("output", o.name, dtype_of(o), shape_of(o)) for o in g.output]
    weight_bytes = sum(onnx.numpy_helper.to_array(t).nbytes for t in g.initializer) if g.initializer else 0
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), "?")
    out = [f"{os.path.basename(path)}: ONNX opset {opset}, {len(g.node)} nodes, {len(inits)} initializers "
           f"({_mib(weight_bytes)})", "", _table(io, ["", "name", "dtype", "shape"]), "", op_support_table(model)]
    return "\n".join(out)


def op_support_table(model) -> str:
    """Every op of an ONNX model (subgraphs included) with its node count and whether webinfer lowers it."""
    from .codegen.support import op_uses
    from .graph.importer import to_ir, upgrade_opset
    from .opschema import schema

    uses = op_uses(to_ir(upgrade_opset(model)))

    def status(u) -> str:
        if u.supported:
            return "yes (expanded)" if schema(u.op, u.domain).expanded else "yes"
        return "NO" if u.nodes else "folded (constant inputs)"

    rows = sorted(([u.label, len(u.nodes) + u.folded, status(u)] for u in uses), key=lambda r: (-r[1], r[0]))
    bad = [u for u in uses if u.failing]
    summary = (f"unsupported: {len(bad)} op{'s' if len(bad) > 1 else ''} ({sum(len(u.nodes) for u in bad)} nodes): "
               + ", ".join(u.label for u in bad)) if bad else f"all {len(uses)} ops are supported"
    return _table(rows, ["op", "count", "supported"]) + "\n\n" + summary


def inspect_artifact(path: str, dim_values: dict | None = None) -> str:
    from .artifact import Artifact
    from .report import build_report, report_table

    art = Artifact.load(path)
    spec = art.spec  # the typed manifest (format/schema.py)
    verified = verify_artifact(art)
    for name in dim_values or {}:
        if name not in spec.dims:
            raise WebinferError(f"--dim {name}: the artifact has no symbolic dim named {name!r} (its symbolic dims: "
                                f"{', '.join(spec.dims) or 'none'})")

    formats = {f.output: f for f in spec.output_formats or ()}  # (classic ML: formatted by the run side)

    def desc(io):
        t = spec.tensors[io.tensor]
        f = formats.get(io.name)
        dtype = t.dtype if f is None else f"{t.dtype} -> " + ("labels" if f.kind == "labels" else "ZipMap dicts")
        return [io.name, dtype, "[" + ", ".join(D.json_text(d) for d in t.shape) + "]"]

    choice, no_choice = _choice_here(spec)
    index = choice.index if choice else 0
    p = spec.programs[index]
    io = [["input"] + desc(i) for i in spec.inputs] + [["output"] + desc(o) for o in p.outputs]
    kernels = Counter(s.label for s in p.steps)
    where = Counter(row.where for row in p.placement)
    weight_bytes = sum(s.bytes for s in spec.shards)
    programs = [[q.kernel_class, len(q.steps), q.shaders, "/".join(q.adapter_types),
                 ", ".join(q.requires.features) or "-"] for q in spec.programs]
    opts = spec.options
    out = [f"{os.path.basename(os.path.normpath(path))}: webinfer artifact v{spec.version} ({spec.producer})",
           f"target {opts.get('target', '?')}, limits {opts.get('limits', '?')}; {len(spec.shaders)} distinct shaders; "
           f"weights {_mib(weight_bytes)} in {len(spec.shards)} shard(s); symbolic dims: "
           f"{', '.join(spec.dims) or 'none'}",
           verified,
           "", _table(programs, ["program", "kernels", "shaders", "tuned for", "requires"]), "",
           (f"on this machine: {choice.kernel_class} ({choice.why})" if choice
            else f"on this machine: {no_choice}"),
           f"ONNX nodes: {len(p.placement)} ("
           + ", ".join(f"{k} {v}" for k, v in sorted(where.items())) + ")",
           *_shape_lines(spec, p),
           "", _table(io, ["", "name", "dtype", "shape"]), "",
           report_table(build_report(spec, dim_values, index)), "",
           _table(sorted(kernels.items(), key=lambda kv: -kv[1]), ["kernel", "dispatches"])]
    return "\n".join(out)


def verify_artifact(art) -> str:
    """Everything a run checks, for every program: the manifest (loaded), every file's bytes, every shader's
    text, bindings and uniforms, and (with a WebGPU adapter) that the device compiles every shader."""
    art.verify_all()
    files = 2 + len(art.spec.shaders) + len(art.spec.shards) + len(art.spec.assets)
    try:
        from .runtime.native import naga_wgsl, request_device

        device = request_device()
    except Exception as e:  # no wgpu or no adapter: the files are still checked
        return f"verified: {files} files (sha256), shaders not compiled (no WebGPU adapter: {type(e).__name__})"
    for i, entry in enumerate(art.spec.shaders):
        try:
            device.create_shader_module(code=naga_wgsl(art.shader(i)))
        except Exception as e:  # wgpu's GPUValidationError with the compiler's report
            lines = [ln.strip() for ln in str(e).splitlines() if "error" in ln.lower()] or [type(e).__name__]
            raise WebinferError(f"{art.file_path(entry.file)}: the device refuses the shader: {lines[0][:160]}") from None
    return f"verified: {files} files (sha256), {len(art.spec.shaders)} shaders compiled"


def _choice_here(spec):
    """(the program this machine's native adapter would run, None) or (None, why there is none)."""
    from .runtime.select import choose_program

    try:
        from .runtime.native import NativeDevice

        facts = NativeDevice().facts()
    except Exception as e:  # no wgpu or no adapter: inspect still describes the artifact
        return None, f"no WebGPU adapter ({type(e).__name__})"
    try:
        return choose_program(spec, facts), None
    except WebinferError as e:
        return None, str(e)


def _shape_lines(m, program) -> list[str]:
    """Bounded dims, run-time guards on the dims, and the image/audio prologue and task epilogues (the typed
    manifest and the program shown)."""
    lines = []
    if m.bounds:
        lines.append("bounded dims (buffers planned for the bound): "
                     + ", ".join(f"{k} <= {v}" for k, v in m.bounds.items()))
    if program.guards:
        lines.append(f"checked per run: {len(program.guards)} condition(s) on the dims, e.g. {program.guards[0].why}")
    if program.branch_guards:
        lines.append(f"checked when their If branch runs: {len(program.branch_guards)} condition(s) on the dims")
    if m.preprocess:
        p = m.preprocess
        box = f", letterbox {list(p.letterbox)} ({p.align}, pad {p.pad_value:g})" if p.letterbox else ""
        resize = p.shorter or (list(p.size) if p.size else "none")
        lines.append(f"image prologue: input {p.image!r} (RGBA8 pixels packed in uint32, any size) -> "
                     f"{p.input!r}: resize {resize}{box}, crop "
                     f"{list(p.crop) if p.crop else 'none'}, {p.channels}, {p.layout}")
    if m.audio:
        a = m.audio
        what = (f"log-mel {a.mel_bins} x {a.n_samples // a.hop_length}" if a.features == "log_mel" else
                f"waveform{' normalised' if a.normalize else ''}")
        lines.append(f"audio prologue: input {a.audio!r} (float32 PCM [channels, samples], rate {a.rate_dim!r} "
                     f"per run) -> {a.sampling_rate} Hz, {what} -> {a.input!r}")
    if m.classify:
        c = m.classify
        lines.append(f"classification epilogue: top {c.top_k} of {c.output!r}"
                     f"{' after softmax' if c.softmax else ''} -> {c.scores!r}, {c.indices!r}"
                     f"{', labels ' + c.labels if c.labels else ''}")
    if m.detect:
        d = m.detect
        lines.append(f"detection epilogue ({d.head} head {d.output!r}): score > {d.score_threshold:g}, "
                     f"class-aware NMS at IoU {d.iou_threshold:g}, at most {d.max_detections} boxes -> "
                     f"{d.detections!r}, {d.count!r}{', labels ' + d.labels if d.labels else ''}")
    if m.segment:
        g = m.segment
        outs = [o for o in (g.segments, g.matte, g.cutout) if o is not None]
        lines.append(f"mask epilogue ({g.mode} of {g.output!r}, resized to the image) -> "
                     f"{', '.join(repr(o) for o in outs)}")
    return lines


def inspect_path(path: str, dim_values: dict | None = None) -> str:
    if os.path.isdir(path):
        return inspect_artifact(path, dim_values)
    if os.path.isfile(path):
        if dim_values:
            raise WebinferError("--dim evaluates an artifact's symbolic dims; build the model first")
        return inspect_onnx(path)
    raise WebinferError(f"{path}: no such file or directory")
