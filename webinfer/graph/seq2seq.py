"""Encoder-decoder export folders (optimum's layout) -> one artifact: the decoder step at the top, the encoder inside.

optimum writes ``encoder_model.onnx`` and either ``decoder_model.onnx`` (the first step: no past in; self- and
cross-attention keys/values out) with ``decoder_with_past_model.onnx`` (a step over past keys/values), or
``decoder_model_merged.onnx``, where an ``If`` on the ``use_cache_branch`` input holds both. We make two graphs:

- the **encode** graph: the encoder followed by the first decoder's cross-attention key/value projections (the
  nodes between ``encoder_hidden_states`` and the ``present.N.encoder.*`` outputs), its outputs named as the
  step's ``past_key_values.N.encoder.*`` inputs. It runs once per input.
- the **step** graph: the with-past decoder without its ``present.N.encoder.*`` outputs. Its cross inputs become
  states (GPU buffers that the encode graph's outputs are copied into once, sized for the longest source); its
  self-attention past goes through the KV-cache rewrite and the sampling head as for decoder-only models.

The step graph is the artifact (``ART/``), the encode graph a nested artifact (``ART/encoder/``), and the
manifest's ``seq2seq`` block says how the runtime (llm/seq2seq.py) joins them: which encode output fills which
state, the dims, and the decoder's first tokens (decoder start + forced language/task tokens from
generation_config.json).
"""

from __future__ import annotations

import json
import os
import re

import onnx

from ..errors import WebinferError

ENCODER, MERGED = "encoder_model.onnx", "decoder_model_merged.onnx"
FIRST, WITH_PAST = "decoder_model.onnx", "decoder_with_past_model.onnx"
CROSS_KEY = "webinfer.cross_states"  # graph metadata: cross states and their bound, read by the KV-cache rewrite
ENCODER_DIR = "encoder"
_CROSS = re.compile(r"^(present|past_key_values)\.(\d+)\.encoder\.(key|value)$")
_SELF = re.compile(r"^(present|past_key_values)\.(\d+)\.decoder\.(key|value)$")


def is_export_folder(path) -> bool:
    """A folder with an encoder and a decoder in one of optimum's two layouts."""
    if not isinstance(path, (str, os.PathLike)) or not os.path.isdir(path):
        return False
    has = lambda name: os.path.isfile(os.path.join(path, name))  # noqa: E731
    return has(ENCODER) and (has(MERGED) or (has(FIRST) and has(WITH_PAST)))


def _load(folder: str, name: str) -> onnx.ModelProto:
    from .importer import load_proto

    return load_proto(os.path.join(folder, name))


def decoders(folder: str) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """(first-step decoder, with-past decoder) from either layout."""
    if os.path.isfile(os.path.join(folder, FIRST)) and os.path.isfile(os.path.join(folder, WITH_PAST)):
        return _load(folder, FIRST), _load(folder, WITH_PAST)
    merged = _load(folder, MERGED)
    return branch_of(merged, False), branch_of(merged, True)


def branch_of(merged: onnx.ModelProto, use_cache: bool) -> onnx.ModelProto:
    """The merged decoder with its ``If`` on the ``use_cache_branch`` input replaced by the chosen branch's
    nodes (outer-scope names stay valid at the top level), and the inputs the branch never reads dropped."""
    model = onnx.ModelProto()
    model.CopyFrom(merged)
    g = model.graph
    ifs = [n for n in g.node if n.op_type == "If" and n.input[0] == "use_cache_branch"]
    if len(ifs) != 1:
        raise WebinferError(f"{MERGED}: expected one If on the use_cache_branch input, found {len(ifs)}")
    node = ifs[0]
    branch = next(a.g for a in node.attribute if a.name == ("then_branch" if use_cache else "else_branch"))
    at = list(g.node).index(node)
    inner = list(branch.node)
    renames = {o.name: out for o, out in zip(branch.output, node.output)}  # branch outputs -> the If's outputs
    made = {x for n in inner for x in n.output}
    inside = {k: v for k, v in renames.items() if k in made}  # (read under the new name inside the branch too)
    for n in inner:
        n.input[:] = [inside.get(x, x) for x in n.input]
        n.output[:] = [inside.get(x, x) for x in n.output]
    extra = [onnx.helper.make_node("Identity", [o.name], [renames[o.name]]) for o in branch.output
             if o.name not in made]  # a branch output that is an outer value or an initializer
    g.initializer.extend(branch.initializer)
    nodes = list(g.node[:at]) + inner + extra + list(g.node[at + 1:])
    del g.node[:]
    g.node.extend(nodes)
    _drop_unused_inputs(g)
    return model


def _drop_unused_inputs(g: onnx.GraphProto) -> None:
    used = {x for n in g.node for x in _all_inputs(n)} | {o.name for o in g.output}
    kept = [v for v in g.input if v.name in used]
    del g.input[:]
    g.input.extend(kept)


def _all_inputs(node: onnx.NodeProto):
    yield from node.input
    for a in node.attribute:  # names read inside subgraphs
        for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
            for n in sub.node:
                yield from _all_inputs(n)


def encode_graph(encoder: onnx.ModelProto, first: onnx.ModelProto, start: int) -> tuple[onnx.ModelProto, list[str]]:
    """The encoder followed by the cross-attention projections of ``first``; outputs named as the step's inputs.
    Where the exporter reads the batch size off the decoder's ``input_ids`` to shape them, the decoder start token
    ``start`` stands in for it."""
    outputs = [o.name for o in first.graph.output if _CROSS.match(o.name)]
    if not outputs:
        raise WebinferError(f"{FIRST}: no present.N.encoder.key/value outputs (the cross-attention keys/values)")
    if "encoder_hidden_states" not in {v.name for v in first.graph.input}:
        raise WebinferError(f"{FIRST}: no encoder_hidden_states input")
    enc_out = [o.name for o in encoder.graph.output]
    if "last_hidden_state" not in enc_out:
        raise WebinferError(f"{ENCODER}: no last_hidden_state output")
    extra = _reached_inputs(first, outputs) - {"encoder_hidden_states"}
    enc_in = {v.name for v in encoder.graph.input}
    for name in sorted(extra):  # exporters read the batch size off the decoder's inputs: give them what they mean
        if name != "input_ids" and not (name == "encoder_attention_mask" and "attention_mask" in enc_in):
            raise WebinferError(f"{FIRST}: the cross-attention keys/values depend on the input {name!r}")
    cross = onnx.utils.Extractor(first).extract_model(["encoder_hidden_states", *sorted(extra)], outputs)
    cross = onnx.compose.add_prefix(cross, "cross/")
    rename = {f"cross/{n}": n.replace("present.", "past_key_values.", 1) for n in outputs}
    rename["cross/encoder_hidden_states"] = "last_hidden_state"
    rename["cross/encoder_attention_mask"] = "attention_mask"
    g = cross.graph
    if "input_ids" in extra:  # the first step's first token: only its shape (batch 1) is read
        g.node.insert(0, onnx.helper.make_node("Constant", [], ["cross/input_ids"], value=onnx.helper.make_tensor(
            "start", onnx.TensorProto.INT64, [1, 1], [start])))
    for n in g.node:
        n.input[:] = [rename.get(x, x) for x in n.input]
        n.output[:] = [rename.get(x, x) for x in n.output]
    merged = onnx.ModelProto()
    merged.CopyFrom(encoder)
    mg = merged.graph
    mg.node.extend(g.node)
    mg.initializer.extend(g.initializer)
    del mg.output[:]
    for o in g.output:
        o.name = rename[o.name]
        mg.output.append(o)
    _merge_opsets(merged, cross)
    return merged, [rename[f"cross/{n}"] for n in outputs]


def _reached_inputs(model: onnx.ModelProto, outputs: list[str]) -> set[str]:
    """The graph inputs the values ``outputs`` depend on."""
    producer = {o: n for n in model.graph.node for o in n.output}
    inputs = {v.name for v in model.graph.input}
    seen, todo, found = set(), list(outputs), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in inputs:
            found.add(name)
        elif name in producer:
            todo.extend(x for x in _all_inputs(producer[name]) if x)
    return found


def _merge_opsets(model: onnx.ModelProto, other: onnx.ModelProto) -> None:
    have = {o.domain: o for o in model.opset_import}
    for o in other.opset_import:
        if o.domain not in have:
            model.opset_import.append(o)
        elif have[o.domain].version != o.version:
            raise WebinferError(f"the encoder and decoder use different opsets of {o.domain or 'ai.onnx'} "
                                f"({have[o.domain].version}, {o.version})")


def step_graph(step: onnx.ModelProto, cross: list[str], max_source: int) -> tuple[onnx.ModelProto, str]:
    """The with-past decoder without its cross presents; the cross inputs recorded as states bounded at
    ``max_source`` positions (graph metadata read by graph/llm/kv_cache.py). Returns (model, the cross dim)."""
    g = step.graph
    inputs = {v.name: v for v in g.input}
    missing = [n for n in cross if n not in inputs]
    if missing:
        raise WebinferError(f"{WITH_PAST}: no inputs {missing[:2]} for the cross-attention keys/values")
    kept = [o for o in g.output if not _CROSS.match(o.name)]
    del g.output[:]
    g.output.extend(kept)
    dims = {inputs[n].type.tensor_type.shape.dim[2].dim_param for n in cross}
    if len(dims) != 1 or "" in dims:
        raise WebinferError(f"{WITH_PAST}: the cross-attention inputs need one symbolic source-length dim "
                            f"(axis 2), got {sorted(dims)}")
    dim = dims.pop()
    if step.ir_version < 10:  # graph metadata needs IR 10; nothing else in the model changes meaning
        step.ir_version = 10
    entry = g.metadata_props.add()
    entry.key, entry.value = CROSS_KEY, json.dumps({"states": cross, "dim": dim, "max": int(max_source)})
    return step, dim


def _read_json(folder: str, name: str) -> dict:
    path = os.path.join(folder, name)
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, ValueError) as e:
        raise WebinferError(f"{path}: not readable JSON ({type(e).__name__})") from None
    if not isinstance(value, dict):
        raise WebinferError(f"{path}: expected a JSON object")
    return value


def _int(value, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise WebinferError(f"generation_config.json: {what} must be a token id, got {str(value)[:40]}")
    return value


def first_tokens(config: dict, gen: dict) -> list[int]:
    """The decoder's first ids: its start token, then the forced ones (Whisper's language, task and
    no-timestamps tokens) in position order. A forced position left open (null: detect the language) is refused."""
    start = gen.get("decoder_start_token_id", config.get("decoder_start_token_id"))
    if isinstance(start, list):  # (some configs give one per batch row)
        start = start[0] if start else None
    ids = [_int(start, "decoder_start_token_id")]
    forced = gen.get("forced_decoder_ids") or []
    for pos, item in enumerate(sorted(forced, key=lambda f: f[0] if isinstance(f, list) and f else -1)):
        if not (isinstance(item, list) and len(item) == 2 and item[0] == pos + 1):
            raise WebinferError(f"generation_config.json: forced_decoder_ids {str(forced)[:80]} must force "
                                "positions 1, 2, ... in turn")
        if item[1] is None:
            raise WebinferError("generation_config.json: forced_decoder_ids leaves a position open (language "
                                "detection); set the language's token id there")
        ids.append(_int(item[1], "forced_decoder_ids"))
    return ids


def eos_ids(config: dict, gen: dict) -> list[int]:
    eos = gen.get("eos_token_id", config.get("eos_token_id"))
    eos = eos if isinstance(eos, list) else [] if eos is None else [eos]
    return [_int(e, "eos_token_id") for e in eos]


def max_source(config: dict) -> int:
    for key in ("max_source_positions", "max_position_embeddings", "n_positions"):
        if isinstance(config.get(key), int) and config[key] > 0:
            return config[key]
    return 1024


def max_target(config: dict, gen: dict) -> int:
    for value in (config.get("max_target_positions"), gen.get("max_length"), config.get("max_position_embeddings")):
        if isinstance(value, int) and value > 1:
            return value
    return 512


def build_folder(folder: str, out_dir: str, build, max_seq: int | None = None, preprocess=None, **options) -> dict:
    """Build the export folder into one artifact at ``out_dir`` (``build``: build.build); ``preprocess`` (a
    prologue) applies to the encoder."""
    from .llm import tokenizer_assets

    config, gen = _read_json(folder, "config.json"), _read_json(folder, "generation_config.json")
    first, step = decoders(folder)
    encoder = _load(folder, ENCODER)
    tokens = first_tokens(config, gen)
    encode, cross = encode_graph(encoder, first, tokens[0])
    del first
    step, dim = step_graph(step, cross, max_source(config))
    max_seq = max_seq if max_seq is not None else max_target(config, gen)
    self_past = sorted({v.name for v in step.graph.input if _SELF.match(v.name)})
    if not self_past:
        raise WebinferError(f"{WITH_PAST}: no past_key_values.N.decoder.key/value inputs")
    spec = {
        "encoder": ENCODER_DIR, "cross": [[n, n] for n in cross], "source_dim": dim,
        "encoder_inputs": [v.name for v in encoder.graph.input if v.name not in
                           {i.name for i in encoder.graph.initializer}],
        "first_tokens": tokens, "eos": eos_ids(config, gen),
        "model_type": str(config.get("model_type", ""))[:40],
    }
    assets = tokenizer_assets(os.path.join(folder, ENCODER))
    pre = os.path.join(folder, "preprocessor_config.json")
    if os.path.isfile(pre):
        with open(pre, "rb") as f:
            assets["preprocessor_config.json"] = f.read()
    manifest = build(step, out_dir, max_seq=max_seq, extra={"seq2seq": spec}, assets=assets, **options)
    options.pop("cpu", None)
    build(encode, os.path.join(out_dir, ENCODER_DIR), preprocess=_encoder_prologue(folder, preprocess), **options)
    return manifest


def _encoder_prologue(folder: str, preprocess):
    """The encoder's prologue: by default (or ``"audio"``) the audio front end of the folder's
    preprocessor_config.json when it names a feature extractor webinfer computes (PCM at any rate in);
    ``"none"`` keeps the encoder's own inputs (log-mel features computed by the caller)."""
    from .audio_prologue import CONFIG, audio_spec

    if preprocess in (False, "none"):
        return "none"
    if preprocess in (None, "audio"):
        spec = audio_spec(folder, strict=preprocess == "audio")
        if spec is None and preprocess == "audio":
            raise WebinferError(f"--preprocess audio: {os.path.join(folder, CONFIG)} names no feature extractor "
                                "webinfer computes")
        return spec if spec is not None else "none"
    return preprocess
