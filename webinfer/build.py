"""build(model) -> artifact: import, lower every node to WGSL kernels, write the artifact directory."""

from __future__ import annotations

import os
import sys
import time
import types

from . import __version__
from .artifact import CPU_MODEL
from .codegen.lower import Lowerer
from .codegen.registry import has_lowering
from .codegen.serialize import write_artifact
from .codegen.support import check_supported
from .errors import UnsupportedOpError, WebinferError
from .graph import audio_prologue, llm, ml_outputs, prepost, seq2seq, vision_epilogues
from .graph.contrib import expand as expand_contrib
from .graph.functions import inline_functions
from .graph.importer import import_model
from .graph.index_bounds import input_index_bounds
from .graph.model_checks import check_dim_names, check_type_constraints
from .graph.optimize import optimize as optimize_graph
from .graph.quantize import FORMATS as quantize_formats
from .graph.quantize import rewrite as quantize_rewrite
from .options import BuildOptions, as_options


def build(model, out_dir: str, *, dims: dict | None = None, target: "str | BuildOptions" = "portable",
          limits: str | None = None, tiles: str | None = None, input_values: dict | None = None, validate: bool = True,
          progress: bool = False, optimize: bool = True, save_optimized: str | None = None,
          max_seq: int | None = None, quantize: str | None = None, generation: bool = True,
          nested_inputs: dict | None = None, preprocess=None, postprocess=None, cpu: bool = False,
          task: str | None = None, extra: dict | None = None, assets: dict | None = None,
          sentence_embedding: str | None = None, cpu_weights: str | None = None) -> dict:
    """Compile ``model`` (path or ModelProto) into an artifact at ``out_dir``; returns the manifest.

    ``target``: the kernel classes to carry (``portable``, ``software``, ``gpu``: options.py), or a
    BuildOptions; ``limits``: the limits tier (``webgpu`` defaults, or ``native``); ``tiles``: the matmul tile
    policy (``balanced``, ``startup``, ``throughput``: options.with_tiles). ``nested_inputs``: the structure of
    sequence/optional graph inputs, as example values (codegen/nested.py).

    ``optimize`` runs the graph passes (graph/optimize.py) first; ``save_optimized`` writes the
    graph that is lowered as ONNX. A decoder with past/present KV tensors is built for generation
    (graph/llm): an in-place KV cache of ``max_seq`` positions (default 1024) and on-GPU sampling
    (``generation=False`` keeps the plain graph: all logits, past as inputs). Tokenizer files beside a model
    file (tokenizer.json, tokenizer_config.json) travel with any artifact as assets.
    ``quantize`` (``int8``/``int4``/``f16``) packs MatMul/Gemm weights and embedding tables (graph/quantize.py).
    ``preprocess`` / ``postprocess`` (a dict or a JSON file): an image prologue (RGBA8 pixels of any size in)
    and a classification epilogue (top-k scores and labels out), graph/prepost.py; with ``task``
    (``object-detection``, ``image-segmentation``, ``background-removal``) ``postprocess`` is that task's
    epilogue instead (graph/vision_epilogues.py).
    ``preprocess="audio"`` (or a
    spec naming a feature extractor, or by itself for a model beside a preprocessor_config.json that names one):
    the audio prologue, PCM at any sample rate in (graph/audio_prologue.py); ``preprocess="none"`` keeps the model's
    inputs.
    ``sentence_embedding`` (``auto``: as the sentence-transformers config beside the model says, or a mode):
    pooling and normalisation as a ``sentence_embedding`` output, graph/pooling.py.
    ``cpu`` also stores the source model as standard ONNX (``artifact.CPU_MODEL``), for pages without WebGPU
    (onnxruntime-web's wasm backend) and ``InferenceSession(..., device="cpu")``; ``manifest["cpu_model"]``
    then says its size, or why it was left out (the GPU graph's inputs or outputs differ from the source's).
    ``cpu_weights`` (``f32``, ``f16``, ``int8``, ``int4``; default: as ``--quantize`` where it is one of those,
    else ``f32``): how the CPU model stores its weights (graph/cpu_weights.py).
    An encoder-decoder export folder (optimum's layout) builds into one artifact (graph/seq2seq.py); ``extra`` and
    ``assets`` are its manifest block and files.
    """
    if seq2seq.is_export_folder(model):  # (a prologue, e.g. the audio front end, goes to the encoder)
        if postprocess is not None or input_values or nested_inputs or save_optimized or not generation:
            raise WebinferError("an encoder-decoder folder builds for generation only (no --postprocess, "
                                "--save-optimized, input values or nested inputs)")
        return seq2seq.build_folder(str(model), out_dir, build, dims=dims, target=target, limits=limits, tiles=tiles,
                                    validate=validate, progress=progress, optimize=optimize, max_seq=max_seq,
                                    quantize=quantize, cpu=cpu, preprocess=preprocess)
    t0 = time.perf_counter()
    options = as_options(target, limits, tiles)
    ir_model = imported(model)
    extra, assets = dict(extra or {}), dict(assets or {})
    extra.update(ml_outputs.manifest_block(ir_model))  # classic-ML labels and ZipMap, formatted at run time
    if preprocess in (False, "none"):  # (the model's own inputs, even beside a preprocessor_config.json)
        preprocess = None
    elif preprocess is None or audio_prologue.is_audio_spec(preprocess):  # (first: a prologue replaces an input)
        preprocess = _audio(ir_model, model, preprocess, extra)
    else:
        extra["preprocess"] = prepost.add_image_prologue(ir_model, preprocess)
    if postprocess is not None or task is not None:
        key, extra_info, assets = vision_epilogues.add_task_epilogue(ir_model, task, postprocess, extra.get("preprocess"))
        extra[key] = extra_info
        postprocess = {} if postprocess is None else postprocess
    if sentence_embedding is not None:
        from .graph.pooling import add_sentence_pooling

        add_sentence_pooling(ir_model, model, sentence_embedding)
    check_dim_names(ir_model, dims)
    check_type_constraints(ir_model)
    if max_seq is not None and not (isinstance(max_seq, int) and max_seq >= 1):
        raise WebinferError(f"--max-seq must be a positive integer, got {max_seq!r}")
    try:
        rewrites = llm.generation_rewrites(ir_model, max_seq) if generation else None
    except ValueError as e:
        raise WebinferError(str(e)) from None
    if max_seq is not None and generation and not rewrites:
        raise WebinferError("--max-seq applies to decoders with a KV cache (past_key_values inputs); this model "
                            "has none")
    if cpu and (task is not None or "audio" in extra or sentence_embedding is not None):  # (no standard-op form yet)
        what = (f"the {task} epilogue" if task is not None else "the audio prologue" if "audio" in extra
                else "the sentence-embedding pooling")
        cpu_note, cpu_bytes = {"skipped": f"{what} has no standard-ONNX form for the CPU path yet"}, None
    else:
        cpu_note, cpu_bytes = (_cpu_model(model, preprocess, postprocess, rewrites, cpu_weights_for(quantize, cpu_weights))
                               if cpu else (None, None))
    index_bounds = input_index_bounds(ir_model)  # before any rewrite hides the embedding Gather
    expand_contrib(ir_model, keep=llm.CONTRIB_KEPT if rewrites else frozenset())
    if quantize not in (None, *quantize_formats):
        raise WebinferError(f"--quantize {quantize!r}: choose from {', '.join(quantize_formats)}")
    weight_rewrites = quantize_rewrite(quantize, n_major_f32=bool(rewrites),
                                       binding_bytes=options.limit_values["max_binding_bytes"])
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
    programs = []  # one per kernel class, from the same optimized graph
    for kclass in options.kernel_classes:
        programs.append((kclass, lower_choosing_branches(
            ir_model, lambda choices, k=kclass: Lowerer(ir_model, kclass=k, limits=options.limits, dim_values=dims,
                                                      input_values=input_values, validate=validate,
                                                      progress=progress, nested_inputs=nested_inputs,
                                                      if_choices=choices).run())))
    assets.update(llm.tokenizer_assets(model))  # any model: pages encode text with it (Session.encode)
    for _, program in programs:
        program.index_bounds = {n: b for n, b in index_bounds.items() if any(n == name for name, _ in program.inputs)}
    if cpu_bytes is not None:
        assets[CPU_MODEL.split("/", 1)[1]] = cpu_bytes
    manifest = write_artifact(programs, out_dir, options, passes=passes, assets=assets,
                              producer=f"webinfer {__version__}", extra=extra)
    manifest["build_seconds"] = round(time.perf_counter() - t0, 3)
    if cpu_note is not None:
        manifest["cpu_model"] = cpu_note
    return manifest


def _audio(ir_model, model, preprocess, extra: dict):
    """The audio prologue (graph/audio_prologue.py): ``--preprocess audio`` reads preprocessor_config.json beside
    the model; without --preprocess it is added when that config names a feature extractor and the model takes
    its features (an encoder; the export's decoder is left alone). Returns the spec used, or None."""
    path = model if isinstance(model, (str, os.PathLike)) else None
    spec = audio_prologue.audio_spec(path, strict=preprocess == "audio") if path is not None else None
    if preprocess == "audio":
        if spec is None:
            raise WebinferError(f"--preprocess audio: no {audio_prologue.CONFIG} naming a feature extractor beside "
                                f"the model ({', '.join(audio_prologue.EXTRACTORS)})")
        preprocess = spec
    elif preprocess is None:
        if spec is None or not audio_prologue.takes_features(ir_model, spec):
            return None
        preprocess = spec
    extra["audio"] = audio_prologue.add_audio_prologue(ir_model, preprocess)
    return preprocess


def lower_choosing_branches(ir_model, lower, most: int = 4):
    """``lower(choices)`` with a branch chosen for each If on a comparison of symbolic dims whose branches differ in
    rank (control_flow.BranchChoiceNeeded): the first choices whose program gives every graph output the rank the
    model declares (an exporter traced one branch; the other predicate value is refused per run, guarded)."""
    from .codegen.kernels.control_flow import BranchChoiceNeeded

    def search(choices: dict):
        try:
            program = lower(choices)
        except BranchChoiceNeeded as e:
            if len(choices) >= most:
                raise
            first = e
            for take in (True, False):
                try:
                    found = search({**choices, e.node: take})
                except UnsupportedOpError:  # (this choice cannot be built or guarded)
                    found = None
                if found is not None:
                    return found
            raise first from None
        return program if not choices or _declared_ranks(ir_model, program) else None

    program = search({})
    if program is None:
        raise UnsupportedOpError("an If on a comparison of dims: neither branch gives the graph outputs their "
                                 "declared ranks")
    return program


def _declared_ranks(ir_model, program) -> bool:
    declared = {v.name: v.shape for v in ir_model.graph.outputs}
    return all(declared.get(name) is None or len(declared[name]) == len(t.shape) for name, t in program.outputs)


def cpu_weights_for(quantize: str | None, cpu_weights: str | None) -> str:
    """The CPU model's weight format: as asked, else following the GPU artifact's --quantize where onnxruntime
    has a form of it (int4 and int8: DequantizeLinear blocks, f16: float16 storage; graph/cpu_weights.py)."""
    from .graph.cpu_weights import FORMATS

    if cpu_weights is None:
        return {"int4": "int4", "int8": "int8", "f16": "f16"}.get(quantize, "f32")
    if cpu_weights not in FORMATS:
        raise WebinferError(f"--cpu-weights {cpu_weights!r}: choose from {', '.join(FORMATS)}")
    return cpu_weights


def _cpu_model(model, preprocess, postprocess, rewrites, weights: str = "f32") -> tuple[dict, bytes | None]:
    """(a note for the caller, the bytes to store): standard ONNX with the artifact's own inputs and outputs
    (the prologue and epilogue as standard ops, graph/cpu_model.py); a decoder built for generation keeps the
    source's past/present interface (the CPU path's generation loop feeds it)."""
    import onnx

    from .graph.cpu_model import cpu_model_bytes
    from .graph.importer import load_proto

    proto = load_proto(model) if isinstance(model, (str, bytes)) or hasattr(model, "__fspath__") else model
    if not isinstance(proto, onnx.ModelProto):
        raise WebinferError("the CPU path needs an ONNX model (a path or a ModelProto)")
    if proto.ByteSize() >= 2**31:
        raise WebinferError("the model is over 2 GiB: one ONNX file cannot carry it for the CPU path (build "
                            "without --cpu)")
    data = cpu_model_bytes(proto, preprocess, postprocess, weights)
    note = {"file": CPU_MODEL, "bytes": len(data), "weights": weights}
    if rewrites:
        note["generation"] = "past/present"  # (the source decoder; site/cpu-chat.mjs loops over it)
    return note, data


def imported(model):
    """The model as the build sees it first: onnx-ir at opset >= 13, ops without a kernel of their own but with
    an ONNX function body inlined (graph/functions.py)."""
    return inline_functions(import_model(model), has_lowering)


class _CallableModule(types.ModuleType):
    """``webinfer.build(...)`` must stay callable after ``import webinfer.build`` has replaced the package's
    lazy attribute with this module (Python binds submodules onto their package)."""

    def __call__(self, *args, **kwargs):
        return build(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
