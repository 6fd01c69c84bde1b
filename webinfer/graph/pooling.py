"""``--sentence-embedding``: a sentence-transformers model's pooling (and normalisation) as graph nodes.

sentence-transformers stores what follows the transformer beside the weights: ``modules.json`` lists the
modules (Transformer, Pooling, Normalize...), ``<path>/config.json`` of the Pooling module names its mode
(``pooling_mode_mean_tokens``, ``_cls_token``, ``_max_tokens``, ``_mean_sqrt_len_tokens``). This rewrite
reads them beside model.onnx (or takes a mode given explicitly) and appends, as it computes them:
mean = sum(h * mask) / max(sum(mask), 1e-9), sqrt-len = sum(h * mask) / sqrt(max(sum(mask), 1e-9)),
max = max over tokens of h where the mask is 1 (else -1e9), cls = h[:, 0]; then Normalize's
x / max(||x||, 1e-12). The result is a new output ``sentence_embedding`` [batch, width], computed on the
GPU like any other node, so a caller reads back one row per text instead of every token's state.
"""

from __future__ import annotations

import json
import os

import numpy as np
import onnx_ir as ir

from ..errors import WebinferError
from .passes._util import new_initializer

OUTPUT = "sentence_embedding"
MODES = ("mean", "cls", "max", "mean_sqrt_len")


def read_config(model_path) -> tuple[str, bool]:
    """(pooling mode, normalize) from the sentence-transformers files beside ``model_path``."""
    folder = os.path.dirname(os.path.abspath(str(model_path)))
    modules_path = os.path.join(folder, "modules.json")
    if not os.path.isfile(modules_path):
        raise WebinferError(f"--sentence-embedding: no sentence-transformers modules.json beside {model_path} "
                            f"(give the mode: --sentence-embedding {'|'.join(MODES)})")
    try:
        with open(modules_path, encoding="utf-8") as f:
            modules = json.load(f)
        types = {m["type"].rsplit(".", 1)[-1]: m.get("path", "") for m in modules}
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise WebinferError(f"{modules_path}: not a sentence-transformers module list ({e})") from None
    if "Pooling" not in types:
        raise WebinferError(f"{modules_path} has no Pooling module")
    pooling_path = os.path.join(folder, types["Pooling"], "config.json")
    try:
        with open(pooling_path, encoding="utf-8") as f:
            cfg = json.load(f)
    except (OSError, ValueError) as e:
        raise WebinferError(f"{pooling_path}: cannot read the pooling config ({e})") from None
    on = [m for m in MODES if cfg.get(f"pooling_mode_{m}_tokens" if m != "cls" else "pooling_mode_cls_token")]
    if len(on) != 1 or any(cfg.get(k) for k in cfg if k.startswith("pooling_mode_") and k not in (
            "pooling_mode_mean_tokens", "pooling_mode_cls_token", "pooling_mode_max_tokens",
            "pooling_mode_mean_sqrt_len_tokens")):
        raise WebinferError(f"{pooling_path}: exactly one of mean, cls, max, mean_sqrt_len pooling is supported")
    return on[0], "Normalize" in types


def add_sentence_pooling(model: ir.Model, model_path, mode: str = "auto") -> dict:
    """Append the pooling (and normalisation) as a ``sentence_embedding`` output; returns the manifest's entry."""
    normalize = True
    if mode == "auto":
        mode, normalize = read_config(model_path)
    elif mode not in MODES:
        raise WebinferError(f"--sentence-embedding {mode!r}: choose auto or one of {', '.join(MODES)}")
    graph = model.graph
    hidden = next((v for v in graph.outputs if v.name in ("last_hidden_state", "token_embeddings")), None) or next(
        (v for v in graph.outputs if v.shape is not None and len(v.shape) == 3), None)
    mask = next((v for v in graph.inputs if v.name == "attention_mask"), None)
    if hidden is None or hidden.shape is None or len(hidden.shape) != 3 or not isinstance(hidden.shape[2], int):
        raise WebinferError("--sentence-embedding: the model needs a token-embeddings output [batch, sequence, width]")
    if mask is None and mode != "cls":
        raise WebinferError("--sentence-embedding: the model has no attention_mask input to pool over")
    opset = model.opset_imports.get("", 17)
    nodes: list[ir.Node] = []

    def node(op: str, inputs, **attrs) -> ir.Value:
        attributes = [ir.AttrInt64(k, v) if isinstance(v, int) else ir.AttrInt64s(k, v) for k, v in attrs.items()]
        n = ir.Node("", op, inputs, attributes=attributes, name=f"pool_{len(nodes)}_{op.lower()}", num_outputs=1)
        nodes.append(n)
        return n.outputs[0]

    def scalar(x: float, hint: str) -> ir.Value:
        return new_initializer(graph, np.array(x, np.float32), hint)

    axis1 = new_initializer(graph, np.array([1], np.int64), "pool_axis1")
    if mode == "cls":
        pooled = node("Gather", [hidden, new_initializer(graph, np.array(0, np.int64), "pool_cls")], axis=1)
    else:
        m = node("Unsqueeze", [node("Cast", [mask], to=ir.DataType.FLOAT.value), new_initializer(
            graph, np.array([-1], np.int64), "pool_axis_last")])  # [batch, seq, 1]
        if mode == "max":
            # where the mask is 0: -1e9 (sentence-transformers' value), else the state
            masked = node("Add", [node("Mul", [hidden, m]), node("Mul", [node("Sub", [m, scalar(1.0, "pool_one")]),
                                                                        scalar(1e9, "pool_big")])])
            pooled = node("ReduceMax", [masked, axis1], keepdims=0) if opset >= 18 else node(
                "ReduceMax", [masked], axes=[1], keepdims=0)
        else:
            total = node("ReduceSum", [node("Mul", [hidden, m]), axis1], keepdims=0)  # [batch, width]
            count = node("Max", [node("ReduceSum", [m, axis1], keepdims=0), scalar(1e-9, "pool_min_count")])
            pooled = node("Div", [total, count if mode == "mean" else node("Sqrt", [count])])
    if normalize:
        norm = node("Sqrt", [node("ReduceSum", [node("Mul", [pooled, pooled]), axis1], keepdims=1)])
        pooled = node("Div", [pooled, node("Max", [norm, scalar(1e-12, "pool_eps")])])
    graph.extend(nodes)
    if any(v.name == OUTPUT for v in graph.outputs):
        raise WebinferError(f"--sentence-embedding: the model already has an output named {OUTPUT!r}")
    pooled.name, pooled.dtype = OUTPUT, hidden.dtype
    pooled.shape = ir.Shape([hidden.shape[0], hidden.shape[2]])
    graph.outputs.append(pooled)
    return {"output": OUTPUT, "pooling": mode, "normalize": normalize}
