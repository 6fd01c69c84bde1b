"""build(model) -> artifact: import, lower every node to WGSL kernels, write the artifact directory."""

from __future__ import annotations

import sys
import time
import types

import numpy as np

from . import __version__
from . import dims as D
from .artifact import ArtifactWriter
from .codegen import packed
from .codegen.lower import Lowerer
from .codegen.program import Program
from .codegen.registry import has_lowering
from .codegen.support import check_supported
from .dtypes import I32_MAX, I32_MIN
from .dtypes import dtype as get_dtype
from .errors import WebinferError
from .graph import llm
from .graph.contrib import expand as expand_contrib
from .graph.functions import inline_functions
from .graph.importer import import_model
from .graph.index_bounds import input_index_bounds
from .graph.model_checks import check_dim_names
from .graph.optimize import optimize as optimize_graph
from .graph.quantize import FORMATS as quantize_formats
from .graph.quantize import rewrite as quantize_rewrite
from .options import SOFTWARE, BuildOptions, KernelClass, as_options


def build(model, out_dir: str, *, dims: dict | None = None, target: "str | BuildOptions" = "portable",
          limits: str | None = None, input_values: dict | None = None, validate: bool = True,
          progress: bool = False, optimize: bool = True, save_optimized: str | None = None,
          max_seq: int | None = None, quantize: str | None = None, generation: bool = True,
          nested_inputs: dict | None = None) -> dict:
    """Compile ``model`` (path or ModelProto) into an artifact at ``out_dir``; returns the manifest.

    ``target``: the kernel classes to carry (``portable``, ``software``, ``gpu``: options.py), or a
    BuildOptions; ``limits``: the limits tier (``webgpu`` defaults, or ``native``). ``nested_inputs``: the
    structure of sequence/optional graph inputs, as example values (codegen/nested.py).

    ``optimize`` runs the graph passes (graph/optimize.py) first; ``save_optimized`` writes the
    graph that is lowered as ONNX. A decoder with past/present KV tensors is built for generation
    (graph/llm): an in-place KV cache of ``max_seq`` positions (default 1024) and on-GPU sampling
    (``generation=False`` keeps the plain graph: all logits, past as inputs). Tokenizer files beside a model
    file (tokenizer.json, tokenizer_config.json) travel with any artifact as assets.
    ``quantize`` (``int8``/``int4``) packs MatMul/Gemm weights and embedding tables (graph/quantize.py).
    """
    t0 = time.perf_counter()
    options = as_options(target, limits)
    ir_model = imported(model)
    check_dim_names(ir_model, dims)
    if max_seq is not None and not (isinstance(max_seq, int) and max_seq >= 1):
        raise WebinferError(f"--max-seq must be a positive integer, got {max_seq!r}")
    try:
        rewrites = llm.generation_rewrites(ir_model, max_seq) if generation else None
    except ValueError as e:
        raise WebinferError(str(e)) from None
    if max_seq is not None and generation and not rewrites:
        raise WebinferError("--max-seq applies to decoders with a KV cache (past_key_values inputs); this model "
                            "has none")
    index_bounds = input_index_bounds(ir_model)  # before any rewrite hides the embedding Gather
    expand_contrib(ir_model, keep=llm.CONTRIB_KEPT if rewrites else frozenset())
    if quantize not in (None, *quantize_formats):
        raise WebinferError(f"--quantize {quantize!r}: choose from {', '.join(quantize_formats)}")
    weight_rewrites = quantize_rewrite(quantize)
    if rewrites:
        batch = llm.batch_dim(ir_model)
        dims = {batch: 1, **(dims or {})} if batch else dims
    try:
        passes = optimize_graph(ir_model, None if optimize else [], {**(rewrites or {}), **weight_rewrites})
    except (llm.kv_cache.KVCacheError, llm.head.HeadError) as e:
        raise WebinferError(f"cannot build for generation: {e}") from None
    # After the passes: they rewrite some ops away (onnxscript's folding turns CastLike into Cast), and what
    # remains is what lowering needs; every unsupported op is still named at once, before any kernel is made.
    check_supported(ir_model, constant_inputs=input_values or ())
    if save_optimized:
        import onnx_ir as ir

        ir.save(ir_model, save_optimized)
    # One program per kernel class. Until the manifest carries several (v2), a multi-class target builds its
    # last class (portable: software), which runs on every adapter.
    kclass = options.kernel_classes[-1]
    program = Lowerer(ir_model, kclass=kclass, limits=options.limits, dim_values=dims, input_values=input_values,
                      validate=validate, progress=progress, nested_inputs=nested_inputs).run()
    assets = llm.tokenizer_assets(model)  # any model: pages encode text with it (Session.encode)
    program.index_bounds = {n: b for n, b in index_bounds.items() if any(n == name for name, _ in program.inputs)}
    manifest = write_artifact(program, out_dir, passes=passes, assets=assets, options=options, kclass=kclass)
    manifest["build_seconds"] = round(time.perf_counter() - t0, 3)
    return manifest


def imported(model):
    """The model as the build sees it first: onnx-ir at opset >= 13, ops without a kernel of their own but with
    an ONNX function body inlined (graph/functions.py)."""
    return inline_functions(import_model(model), has_lowering)


def gpu_bytes(value: np.ndarray, what: str) -> bytes:
    """A constant in GPU storage form (32 bits per element, int64 range-checked; packed types packed)."""
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


def write_artifact(program: Program, out_dir: str, passes: list | None = None,
                   assets: dict[str, bytes] | None = None, options: BuildOptions | None = None,
                   kclass: KernelClass | None = None) -> dict:
    writer = ArtifactWriter(out_dir)
    for name, data in (assets or {}).items():
        writer.add_asset(name, data)
    tensors = []
    for t in program.tensors:
        entry = {"dtype": t.dtype, "shape": [D.to_json(d) for d in t.shape], "kind": t.kind,
                 "alias": t.alias.id if t.alias is not None else None}
        if t.capacity is not None:
            entry["capacity"] = list(t.capacity)
        if t.kind == "weight":
            entry["chunks"] = writer.add_weight(gpu_bytes(t.value, f"constant {t.name or t.id}"))
        elif t.kind == "const" or t.sym is not None:
            entry["kind"] = "host"
        tensors.append(entry)
    steps = []
    for s in program.steps:
        steps.append({
            "shader": writer.add_shader(s.shader),
            "reads": [t.id for t in s.reads],
            "writes": [t.id for t in s.writes],
            "uniforms": [[n, typ, D.to_json(v)] for n, typ, v in s.uniforms],
            "grid": [D.to_json(g) for g in s.grid],
            "label": s.label,
            "node": s.node,
            **({"when": [s.when[0], D.to_json(s.when[1]), int(s.when[2])]} if s.when else {}),
        })
    manifest = {
        "producer": f"webinfer {__version__}",
        "dims": program.dims,
        "inputs": [{"name": n, "tensor": t.id} for n, t in program.inputs],
        "outputs": [{"name": n, "tensor": t.id} for n, t in program.outputs],
        "states": [{"name": n, "tensor": t.id} for n, t in program.states],
        "bounds": program.bounds,
        "index_bounds": program.index_bounds,
        "tensors": tensors,
        "steps": steps,
        "control": program.control,  # If/Loop/Scan step ranges (codegen/kernels/control_flow.py)
        "groups": program.groups,  # sequence/optional inputs and outputs -> flat names (codegen/nested.py)
        "placement": program.placement,
        "passes": passes or [],
        "options": (options or BuildOptions()).to_json(),
        "kernel_class": (kclass or SOFTWARE).name,
    }
    return writer.write(manifest)


class _CallableModule(types.ModuleType):
    """``webinfer.build(...)`` must stay callable after ``import webinfer.build`` has replaced the package's
    lazy attribute with this module (Python binds submodules onto their package)."""

    def __call__(self, *args, **kwargs):
        return build(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
