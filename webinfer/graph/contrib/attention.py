"""Attention contrib ops -> ONNX opset 23's Attention and RotaryEmbedding (in webinfer's domain, see
codegen/kernels/contrib.py), with the projections, splits, biases and masks around them as ONNX ops.

- ``RotaryEmbedding``: the same computation as ONNX's, inputs reordered (position ids 2-D).
- ``MultiHeadAttention``: 3-D query/key/value (or 4-D [b, heads, seq, head] key/value), the packed bias split
  over q, k, v, a key padding mask (0 = padding, adds ``mask_filter_value`` like onnxruntime) and an
  attention bias added to the scores, past/present key and value.
- ``Attention``: the input projection (one MatMul over the merged Q/K/V weights, + bias), then the same; past
  and present in onnxruntime's stacked [2, b, heads, seq, head] layout; masks as raw 0/1 tensors.
- ``GroupQueryAttention`` (builds without a KV cache; generation builds rewrite it in graph/llm/gqa.py):
  packed or separate q/k/v, rotary on q and k at positions past + i, causal grouped-query attention over
  past + new. ``seqlens_k``/``total_sequence_length`` are not read: every sequence of the batch is taken to
  be full (no padding), which is how a single-sequence decoder runs.
"""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir

from ...opschema import WEBINFER_DOMAIN
from .builder import Builder, expansion

MASK_FILTER = -10000.0  # onnxruntime's default mask_filter_value


def _i64(b: Builder, values, hint: str) -> ir.Value:
    return b.const(np.array(values, np.int64), hint)


def _last_dim(v: ir.Value) -> int | None:
    return v.shape[-1] if v.shape is not None and isinstance(v.shape[-1], int) else None


def _split_last(b: Builder, x: ir.Value, sizes: list[int]) -> list[ir.Value]:
    outs = b.op("Split", [x, _i64(b, sizes, "split")], {"axis": -1}, outputs=len(sizes))
    for o, n in zip(outs, sizes):
        o.dtype = x.dtype
        if x.shape is not None:
            o.shape = ir.Shape(list(x.shape.dims[:-1]) + [n])
    return outs


def _slice_last(b: Builder, x: ir.Value, start: int, end: int) -> ir.Value:
    return b.op("Slice", [x, _i64(b, [start], "start"), _i64(b, [end], "end"), _i64(b, [-1], "axis")])


def _padding_mask(b: Builder, mask: ir.Value, filter_value: float) -> ir.Value:
    """0/1 mask [b, t] (or [b, s, t]) -> additive float mask [b, 1, 1 or s, t]: 0 keeps, filter_value masks."""
    rank = len(mask.shape) if mask.shape is not None else None
    if rank not in (2, 3):
        raise b.unsupported(f"a mask of rank {rank} (raw 0/1 masks of rank 2 or 3 are supported)")
    dt = b.float_dtype or ir.DataType.FLOAT
    m = b.op("Cast", [mask], {"to": dt}, dtype=dt)
    one = b.const(np.array(1.0, dt.numpy()), "one")
    fill = b.const(np.array(filter_value, dt.numpy()), "mask_filter")
    add = b.op("Mul", [b.op("Sub", [one, m], dtype=dt), fill], dtype=dt)
    return b.op("Unsqueeze", [add, _i64(b, [1, 2] if rank == 2 else [1], "axes")], dtype=dt)


def _add_masks(b: Builder, *masks: ir.Value | None) -> ir.Value | None:
    present = [m for m in masks if m is not None]
    if not present:
        return None
    out = present[0]
    for m in present[1:]:
        out = b.op("Add", [out, m])
    return out


def _attention(b: Builder, q, k, v, mask, past_k, past_v, *, heads: int, kv_heads: int, scale, causal: int,
               softcap: float = 0.0) -> list[ir.Value]:
    attrs = {"q_num_heads": heads, "kv_num_heads": kv_heads, "is_causal": int(causal),
             "scale": None if scale is None else float(scale), "softcap": float(softcap) if softcap else None}
    return b.op("Attention", [q, k, v, mask, past_k, past_v], attrs, domain=WEBINFER_DOMAIN, outputs=3)


@expansion("RotaryEmbedding")
def rotary_embedding(node: ir.Node, b: Builder) -> list:
    x, pos, cos, sin = (b.input(i) for i in range(4))
    if int(b.attr("is_packed_batching", 0)):
        raise b.unsupported("is_packed_batching")
    if float(b.attr("scale", 1.0)) != 1.0:
        raise b.unsupported("a scale other than 1")
    if pos is None or pos.shape is None or len(pos.shape) != 2:
        raise b.unsupported("position_ids must be 2-D [batch, sequence]")
    rot = int(b.attr("rotary_embedding_dim", 0) or 0)
    heads = int(b.attr("num_heads", 0) or 0)
    if x.shape is not None and len(x.shape) == 3 and not heads:
        half = _last_dim(cos)
        hidden = _last_dim(x)
        if half is None or hidden is None:
            raise b.unsupported("3-D input without num_heads needs static hidden and cache sizes")
        heads = hidden // (2 * half)
    attrs = {"interleaved": int(b.attr("interleaved", 0)), "num_heads": heads or None,
             "rotary_embedding_dim": rot or None}
    return [b.op("RotaryEmbedding", [x, cos, sin, pos], attrs, domain=WEBINFER_DOMAIN)]


def _to_bnsh(b: Builder, x: ir.Value, heads: int) -> ir.Value:
    """[b, s, heads * d] -> [b, heads, s, d]."""
    r = b.op("Reshape", [x, _i64(b, [0, 0, heads, -1], "heads")])
    return b.op("Transpose", [r], {"perm": [0, 2, 1, 3]})


@expansion("MultiHeadAttention")
def multi_head_attention(node: ir.Node, b: Builder) -> list:
    q, k, v, bias, pad_mask, attn_bias, past_k, past_v = (b.input(i) for i in range(8))
    heads = int(b.attr("num_heads"))
    if any(b.input(i) is not None for i in (8, 9)):
        raise b.unsupported("past_sequence_length / cache_indirection (shared buffers, beam search)")
    if b.wanted(3):
        raise b.unsupported("the qk output")
    if q.shape is None or len(q.shape) != 3 or k is None or v is None:
        raise b.unsupported("query must be 3-D with key and value given (packed QKV is not supported)")
    k_rank = len(k.shape) if k.shape is not None else None
    if bias is not None:
        hidden = _last_dim(q)
        if hidden is None or k_rank != 3:
            raise b.unsupported("a bias needs a static hidden size and 3-D key/value")
        v_hidden = _last_dim(v) or hidden
        q = b.op("Add", [q, _slice_last(b, bias, 0, hidden)])
        k = b.op("Add", [k, _slice_last(b, bias, hidden, 2 * hidden)])
        v = b.op("Add", [v, _slice_last(b, bias, 2 * hidden, 2 * hidden + v_hidden)])
    if k_rank == 4:  # key/value already [b, heads, kv_seq, head]: the query goes 4-D as well
        if past_k is not None:
            raise b.unsupported("past with 4-D key/value")
        q4 = _to_bnsh(b, q, heads)
        mask = _add_masks(b, _padding_mask(b, pad_mask, _filter(b)) if pad_mask is not None else None, attn_bias)
        out, _, _ = _attention(b, q4, k, v, mask, None, None, heads=heads, kv_heads=heads,
                               scale=b.attr("scale"), causal=b.attr("unidirectional", 0))
        t = b.op("Transpose", [out], {"perm": [0, 2, 1, 3]})
        return [b.op("Reshape", [t, _i64(b, [0, 0, -1], "merge")])]
    mask = _add_masks(b, _padding_mask(b, pad_mask, _filter(b)) if pad_mask is not None else None, attn_bias)
    out, pk, pv = _attention(b, q, k, v, mask, past_k, past_v, heads=heads, kv_heads=heads,
                             scale=b.attr("scale"), causal=b.attr("unidirectional", 0))
    return [out, pk, pv]


def _filter(b: Builder) -> float:
    return float(b.attr("mask_filter_value", MASK_FILTER))


@expansion("Attention")
def attention(node: ir.Node, b: Builder) -> list:
    x, weights, bias, mask, past, attn_bias = (b.input(i) for i in range(6))
    heads = int(b.attr("num_heads"))
    if int(b.attr("do_rotary", 0)) or int(b.attr("past_present_share_buffer", 0)) or b.input(6) is not None:
        raise b.unsupported("do_rotary / past_present_share_buffer")
    width = _last_dim(weights)
    sizes = b.attr("qkv_hidden_sizes")
    sizes = [int(s) for s in sizes] if sizes else ([width // 3] * 3 if width else None)
    if sizes is None:
        raise b.unsupported("the weights' width must be static")
    qkv = b.op("MatMul", [x, weights])
    if bias is not None:
        qkv = b.op("Add", [qkv, bias])
    q, k, v = _split_last(b, qkv, sizes)
    past_k = past_v = None
    if past is not None:
        past_k = b.op("Gather", [past, _i64(b, 0, "key")], {"axis": 0})
        past_v = b.op("Gather", [past, _i64(b, 1, "value")], {"axis": 0})
    pad = None
    if mask is not None:
        if mask.shape is None or len(mask.shape) not in (2, 3):
            raise b.unsupported("mask_index as lengths (1-D) or 4-D (raw 0/1 masks of rank 2 or 3 are supported)")
        pad = _padding_mask(b, mask, _filter(b))
    out, pk, pv = _attention(b, q, k, v, _add_masks(b, pad, attn_bias), past_k, past_v, heads=heads,
                             kv_heads=heads, scale=b.attr("scale"), causal=b.attr("unidirectional", 0))
    present = None
    if b.wanted(1):
        axis0 = _i64(b, [0], "axis0")
        present = b.op("Concat", [b.op("Unsqueeze", [pk, axis0]), b.op("Unsqueeze", [pv, axis0])], {"axis": 0})
    return [out, present]


_GQA_UNSUPPORTED_INPUTS = {11: "head_sink", 12: "k_scale", 13: "v_scale", 14: "q_norm_weight",
                           15: "k_norm_weight", 16: "query_seqlens"}


def gqa_layout(b: Builder) -> dict:
    """What a GroupQueryAttention node asks for, checked: heads, head size, rotary, scale, softcap."""
    for i, name in _GQA_UNSUPPORTED_INPUTS.items():
        if b.input(i) is not None:
            raise b.unsupported(f"the {name} input")
    if int(b.attr("local_window_size", -1)) != -1:
        raise b.unsupported("local_window_size (sliding-window attention)")
    if int(b.attr("smooth_softmax", -1)) not in (-1, 0) or int(b.attr("qk_output", 0)):
        raise b.unsupported("smooth_softmax / qk_output")
    if str(b.attr("k_quant_type", "NONE")) not in ("NONE", "b'NONE'") or int(b.attr("sliding_window_cache", 0)):
        raise b.unsupported("a quantized or windowed KV cache")
    heads, kv_heads = int(b.attr("num_heads")), int(b.attr("kv_num_heads"))
    q = b.input(0)
    packed = b.input(1) is None
    width = _last_dim(q)
    if width is None:
        raise b.unsupported("the query's hidden size must be static")
    head = width // (heads + 2 * kv_heads) if packed else width // heads
    rotary = bool(int(b.attr("do_rotary", 0)))
    cos = b.input(7)
    rot = 2 * _last_dim(cos) if rotary and cos is not None and _last_dim(cos) else head
    scale = b.attr("scale")
    scale = float(scale) if scale else 1.0 / math.sqrt(head)
    return {"heads": heads, "kv_heads": kv_heads, "head": head, "packed": packed, "rotary": rotary,
            "rotary_dim": rot, "interleaved": int(b.attr("rotary_interleaved", 0)), "scale": scale,
            "softcap": float(b.attr("softcap", 0.0) or 0.0), "causal": int(b.attr("causal", 1))}


def gqa_qkv(b: Builder, lay: dict) -> tuple[ir.Value, ir.Value, ir.Value]:
    """q [b, s, heads * d], k and v [b, s, kv_heads * d]: split from the packed input, or as given."""
    if lay["packed"]:
        d = lay["head"]
        return tuple(_split_last(b, b.input(0), [lay["heads"] * d, lay["kv_heads"] * d, lay["kv_heads"] * d]))
    return b.input(0), b.input(1), b.input(2)


def gqa_positions(b: Builder, q: ir.Value, past_k: ir.Value | None) -> ir.Value:
    """Rotary positions [b, s]: the node's position_ids, else past + 0 .. s-1 for every sequence."""
    if b.input(9) is not None:
        return b.input(9)
    int64 = ir.DataType.INT64
    bs = b.op("Shape", [q], {"start": 0, "end": 2}, dtype=int64, shape=[2])
    seq = b.op("Shape", [q], {"start": 1, "end": 2}, dtype=int64, shape=[1])
    if past_k is not None:
        past = b.op("Shape", [past_k], {"start": 2, "end": 3}, dtype=int64, shape=[1])
    else:
        past = _i64(b, [0], "past")
    zero = _i64(b, [0], "zero")
    start = b.op("Squeeze", [past, zero], dtype=int64, shape=[])
    end = b.op("Squeeze", [b.op("Add", [past, seq], dtype=int64, shape=[1]), zero], dtype=int64, shape=[])
    pos = b.op("Range", [start, end, b.const(np.array(1, np.int64), "one")], dtype=int64)
    return b.op("Expand", [pos, bs], dtype=int64)


@expansion("GroupQueryAttention")
def group_query_attention(node: ir.Node, b: Builder) -> list:
    lay = gqa_layout(b)
    past_k, past_v = b.input(3), b.input(4)
    q, k, v = gqa_qkv(b, lay)
    if lay["rotary"]:
        pos = gqa_positions(b, q, past_k)
        rot = {"interleaved": lay["interleaved"], "rotary_embedding_dim": lay["rotary_dim"]}
        q = b.op("RotaryEmbedding", [q, b.input(7), b.input(8), pos], {**rot, "num_heads": lay["heads"]},
                 domain=WEBINFER_DOMAIN, shape=q.shape)
        k = b.op("RotaryEmbedding", [k, b.input(7), b.input(8), pos], {**rot, "num_heads": lay["kv_heads"]},
                 domain=WEBINFER_DOMAIN, shape=k.shape)
    out, pk, pv = _attention(b, q, k, v, b.input(10), past_k, past_v, heads=lay["heads"], kv_heads=lay["kv_heads"],
                             scale=lay["scale"], causal=lay["causal"], softcap=lay["softcap"])
    return [out, pk, pv]
