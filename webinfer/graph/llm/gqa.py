"""onnxruntime's GroupQueryAttention over the in-place KV cache: each layer -> one ``webinfer.CachedAttention``.

onnxruntime-genai's model builder writes a decoder layer's attention as one ``com.microsoft.GroupQueryAttention``
(packed or separate q/k/v, rotary from cos/sin caches, past_key/past_value graph inputs, present outputs).
Like kv_cache.py does for the exporters' spelled-out attention, this keeps the cache on the GPU: the past
inputs become state buffers of ``max_seq`` positions, the presents go away, and each node becomes
``CachedAttention(q, k, v, causal mask, past_k, past_v[, cos, sin])`` over [b, s, heads, d] views of the
projections (no transposes). Rotary (rotate_half over the whole head) is applied by the kernel as it reads q
and k, from cos/sin rows gathered at positions past .. past + s - 1; an interleaved or partial rotary runs as
RotaryEmbedding first. The causal mask [1, 1, s, past + s] and the positions are built once for all layers.

``seqlens_k`` and ``total_sequence_length`` are not read: the generator runs one sequence without padding,
so every row's position is past + i (what onnxruntime computes from them in that case).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ...opschema import MICROSOFT_DOMAIN, WEBINFER_DOMAIN
from ..contrib.attention import gqa_layout, gqa_positions, gqa_qkv
from ..contrib.builder import Builder
from .kv_cache import KVCacheError, keep_states

OP = "GroupQueryAttention"


def gqa_nodes(graph: ir.Graph) -> list[ir.Node]:
    """The GroupQueryAttention nodes whose past key/value are graph inputs (a decoder with a KV cache)."""
    out = []
    for node in graph:
        if node.domain == MICROSOFT_DOMAIN and node.op_type == OP and len(node.inputs) > 4:
            past_k, past_v = node.inputs[3], node.inputs[4]
            if past_k is not None and past_v is not None and past_k.is_graph_input() and past_v.is_graph_input():
                out.append(node)
    return out


def is_gqa_model(model: ir.Model) -> bool:
    return bool(gqa_nodes(model.graph))


def _i64(b: Builder, values, hint: str) -> ir.Value:
    return b.const(np.array(values, np.int64), hint)


class _Shared:
    """Values every layer reads, built once (with the first layer's nodes): positions, cos/sin rows, mask."""

    def __init__(self):
        self.values: dict = {}

    def get(self, key, make):
        if key not in self.values:
            self.values[key] = make()
        return self.values[key]


def _causal_mask(b: Builder, pos: ir.Value, past_k: ir.Value) -> ir.Value:
    """mask[0, 0, i, j] = j <= position of row i, for keys j in [0, past + s): bool [1, 1, s, past + s]."""
    int64 = ir.DataType.INT64
    past = b.op("Shape", [past_k], {"start": 2, "end": 3}, dtype=int64, shape=[1])
    seq = b.op("Shape", [pos], {"start": 1, "end": 2}, dtype=int64, shape=[1])
    total = b.op("Squeeze", [b.op("Add", [past, seq], dtype=int64), _i64(b, [0], "axis0")], dtype=int64, shape=[])
    cols = b.op("Range", [b.const(np.array(0, np.int64), "zero"), total, b.const(np.array(1, np.int64), "one")],
                dtype=int64)
    rows = b.op("Unsqueeze", [b.op("Gather", [pos, b.const(np.array(0, np.int64), "row0")], {"axis": 0},
                                   dtype=int64), _i64(b, [1], "axis1")], dtype=int64)
    causal = b.op("LessOrEqual", [cols, rows], dtype=ir.DataType.BOOL)
    return b.op("Unsqueeze", [causal, _i64(b, [0, 1], "axes01")], dtype=ir.DataType.BOOL)


def _rows(b: Builder, cache: ir.Value, pos: ir.Value) -> ir.Value:
    """cos or sin [max_pos, d/2] at the first sequence's positions -> [1, s, d] (both halves, rotate_half)."""
    first = b.op("Gather", [pos, b.const(np.array([0], np.int64), "seq0")], {"axis": 0}, dtype=ir.DataType.INT64)
    half = b.op("Gather", [cache, first], {"axis": 0})
    return b.op("Concat", [half, half], {"axis": -1})


def _rewrite(graph: ir.Graph, node: ir.Node, layer: int, shared: _Shared, cache: dict) -> tuple[str, str]:
    b = Builder(graph, node, cache)
    lay = gqa_layout(b)
    if not lay["causal"] or b.input(10) is not None:
        raise KVCacheError(f"attention {layer} ({node.name}): only causal GroupQueryAttention without "
                           f"attention_bias runs over the KV cache")
    if lay["head"] % 4:
        raise KVCacheError(f"attention {layer}: head size {lay['head']} is not a multiple of 4")
    past_k, past_v = b.input(3), b.input(4)
    q, k, v = gqa_qkv(b, lay)
    pos = shared.get("pos", lambda: gqa_positions(b, q, past_k))
    mask = shared.get("mask", lambda: _causal_mask(b, pos, past_k))
    fused = lay["rotary"] and not lay["interleaved"] and lay["rotary_dim"] == lay["head"]
    if lay["rotary"] and not fused:
        rot = {"interleaved": lay["interleaved"], "rotary_embedding_dim": lay["rotary_dim"]}
        q = b.op("RotaryEmbedding", [q, b.input(7), b.input(8), pos], {**rot, "num_heads": lay["heads"]},
                 domain=WEBINFER_DOMAIN, shape=q.shape)
        k = b.op("RotaryEmbedding", [k, b.input(7), b.input(8), pos], {**rot, "num_heads": lay["kv_heads"]},
                 domain=WEBINFER_DOMAIN, shape=k.shape)
    d = lay["head"]
    heads = [_i64(b, [0, 0, h, d], f"bshd{h}") for h in (lay["heads"], lay["kv_heads"])]
    q4 = b.op("Reshape", [q, heads[0]])
    k4, v4 = b.op("Reshape", [k, heads[1]]), b.op("Reshape", [v, heads[1]])
    inputs = [q4, k4, v4, mask, past_k, past_v]  # the kernel reads [b, s, heads, d] (bshd)
    if fused:
        inputs += [shared.get(("cos", id(b.input(7))), lambda: _rows(b, b.input(7), pos)),
                   shared.get(("sin", id(b.input(8))), lambda: _rows(b, b.input(8), pos))]
    attn = b.op("CachedAttention", inputs,
                {"scale": lay["scale"], "softcap": lay["softcap"], "q_heads": lay["heads"], "kv_heads": lay["kv_heads"],
                 "layer": layer, "bshd": 1}, domain=WEBINFER_DOMAIN)
    out = b.op("Reshape", [attn, _i64(b, [0, 0, lay["heads"] * d], "merge")])
    graph.insert_before(node, b.nodes)
    old = node.outputs[0]
    out.dtype, out.shape = old.dtype, old.shape
    old.replace_all_uses_with(out, replace_graph_outputs=True)
    if old.is_graph_output():
        out.name, old.name = old.name, None
    for v_past in (past_k, past_v):  # the cache's layout: [batch, kv heads, past, head]
        dims = list(v_past.shape.dims) if v_past.shape is not None else [None, None, "past_sequence_length", None]
        v_past.shape = ir.Shape([dims[0], lay["kv_heads"], dims[2], d])
    return past_k.name, past_v.name


def run(model: ir.Model, max_seq: int) -> int:
    """Rewrite every GroupQueryAttention over the KV cache; returns the number of layers rewritten."""
    graph = model.graph
    nodes = gqa_nodes(graph)
    if not nodes:
        return 0
    shared, cache, states, presents = _Shared(), {}, [], set()
    for layer, node in enumerate(nodes):
        states += _rewrite(graph, node, layer, shared, cache)
        presents.update(node.outputs[1:3])
    keep_states(model, states, presents, max_seq)
    for node in nodes:
        graph.remove(node, safe=True)
    return len(nodes)
