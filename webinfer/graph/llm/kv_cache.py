"""In-place KV cache: past/present Concat + attention -> one ``webinfer.CachedAttention`` per layer.

Exporters write a decoder step as ``present = Concat(past, new, axis=-2)`` followed by a grouped-query
attention spelled out in primitives (repeat the KV heads with Unsqueeze/Expand/Reshape, K^T, scale,
MatMul, add the mask, Softmax, a NaN guard, MatMul with V). Run as written, every token would upload the
whole cache, copy it into ``present``, expand it to the query heads and read it back.

This rewrite keeps the cache on the GPU instead: each ``past_key_values.*`` graph input becomes a state
buffer of ``max_seq`` positions (recorded in the graph's metadata, read by the lowerer), and each layer's
attention becomes ``CachedAttention(q, k_new, v_new, mask, past_k, past_v)``, which writes the new keys
and values at positions [past, past + n) and attends over [0, past + n). ``present.*`` outputs go away.
The head transposes the exporter wrote around the attention are absorbed too, with the rotary embeddings
(HF's rotate_half, or ONNX's RotaryEmbedding, whose half-width caches are widened to rows once for all
layers) between them when there are any (``bshd=1``: inputs q, k, v in [b, s, heads, d], plus cos/sin
[b, s, d] for the rotary; the output in [b, s, heads, d]): a decode layer's attention is then one or two
kernels instead of about a dozen.
"""

from __future__ import annotations

import json

import numpy as np
import onnx_ir as ir

from ..passes._util import const, int_attr, new_initializer, replace_value
from . import attention_match

DOMAIN = "webinfer"
META_KEY = "webinfer.kv_cache"
CROSS_KEY = "webinfer.cross_states"


class KVCacheError(ValueError):
    """The model has past/present tensors but not in a pattern this rewrite understands."""


def kv_concats(graph: ir.Graph) -> dict[ir.Value, ir.Node]:
    """present output -> its Concat(past graph input, new) node, for every KV pair of the graph."""
    found = {}
    for out in graph.outputs:
        node = out.producer()
        if node is None or node.op_type != "Concat" or node.domain != "" or len(node.inputs) != 2:
            continue
        past = node.inputs[0]
        if past is None or not past.is_graph_input() or past.shape is None or len(past.shape) != 4:
            continue
        if int_attr(node, "axis", 0) not in (-2, 2):
            continue
        found[out] = node
    return found


def is_kv_model(model: ir.Model) -> bool:
    """A past/present Concat is a KV cache when an attention (Softmax or Attention) comes after it or its graph
    input is named as a past (then a missing attention is the rewrite's clear error): a vision model whose output
    concatenates its [n, c, h, w] input along H has the same Concat, and is no decoder."""
    concats = kv_concats(model.graph)
    named = any("past" in (n.inputs[0].name or "").lower() for n in concats.values())
    return bool(concats) and (named or _reaches_attention([n.outputs[0] for n in concats.values()]))


def _reaches_attention(values: list[ir.Value]) -> bool:
    seen: set[int] = set()
    while values:
        for node in (u.node for u in values.pop().uses()):
            if node.op_type in ("Softmax", "Attention") and node.domain in ("", "ai.onnx"):
                return True
            if id(node) not in seen:
                seen.add(id(node))
                values.extend(node.outputs)
    return False


def _perm(node: ir.Node | None, perm: list[int]) -> bool:
    a = node.attributes.get("perm") if node is not None else None
    return node is not None and node.op_type == "Transpose" and a is not None and list(a.as_ints()) == perm


def _peel_heads_transpose(value: ir.Value) -> ir.Value | None:
    """[b, s, h, d] -> Transpose(0, 2, 1, 3) -> value: the [b, s, h, d] tensor, else None."""
    node = value.producer()
    return node.inputs[0] if _perm(node, [0, 2, 1, 3]) else None


def _slice_range(value: ir.Value, x: ir.Value, d: int) -> tuple[int, int] | None:
    node = value.producer()
    if node is None or node.op_type != "Slice" or node.inputs[0] is not x or len(node.inputs) < 4:
        return None
    starts, ends, axes = (const(node.inputs[i]) for i in (1, 2, 3))
    steps = const(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] is not None else None
    if starts is None or ends is None or axes is None or starts.size != 1 or int(axes.reshape(-1)[0]) not in (-1, 3):
        return None
    if steps is not None and int(steps.reshape(-1)[0]) != 1:
        return None
    return int(starts.reshape(-1)[0]), min(int(ends.reshape(-1)[0]), d)


def _unsqueezed(value: ir.Value) -> ir.Value | None:
    """Unsqueeze(t, axes=[1]) -> t."""
    node = value.producer()
    if node is None or node.op_type != "Unsqueeze" or len(node.inputs) < 2:
        return None
    axes = const(node.inputs[1])
    return node.inputs[0] if axes is not None and axes.reshape(-1).tolist() == [1] else None


def _rotary(value: ir.Value, d: int) -> tuple[ir.Value, ir.Value, ir.Value] | None:
    """x * cos + cat(-x[..., h:], x[..., :h]) * sin (HF's rotate_half), x = Transpose(x0): (x0, cos, sin)."""
    add = value.producer()
    if add is None or add.op_type != "Add" or add.domain != "":
        return None
    for a, b in ((add.inputs[0], add.inputs[1]), (add.inputs[1], add.inputs[0])):
        ma, mb = a.producer(), b.producer()
        if ma is None or mb is None or ma.op_type != "Mul" or mb.op_type != "Mul":
            continue
        for x, c in ((ma.inputs[0], ma.inputs[1]), (ma.inputs[1], ma.inputs[0])):
            for r, sn in ((mb.inputs[0], mb.inputs[1]), (mb.inputs[1], mb.inputs[0])):
                cat = r.producer()
                if cat is None or cat.op_type != "Concat" or len(cat.inputs) != 2 or int_attr(cat, "axis", 0) not in (-1, 3):
                    continue
                neg = cat.inputs[0].producer()
                if neg is None or neg.op_type != "Neg":
                    continue
                if _slice_range(neg.inputs[0], x, d) != (d // 2, d) or _slice_range(cat.inputs[1], x, d) != (0, d // 2):
                    continue
                x0, cos, sin = _peel_heads_transpose(x), _unsqueezed(c), _unsqueezed(sn)
                if x0 is not None and cos is not None and sin is not None:
                    return x0, cos, sin
    return None


def _rotary_op(value: ir.Value, d: int) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value | None] | None:
    """ONNX's RotaryEmbedding (opset 23, or webinfer's domain) over the whole head, not interleaved, on
    Transpose(x0) [b, h, s, d]: (x0, cos, sin, position ids or None), the caches [.., d/2] wide."""
    node = value.producer()
    if node is None or node.op_type != "RotaryEmbedding" or node.domain not in ("", "ai.onnx", DOMAIN):
        return None
    if int_attr(node, "interleaved", 0) or int_attr(node, "rotary_embedding_dim", 0) not in (0, d) or d % 2:
        return None
    x0 = _peel_heads_transpose(node.inputs[0])
    cos, sin = node.inputs[1], node.inputs[2]
    pos = node.inputs[3] if len(node.inputs) > 3 else None
    if x0 is None or any(c.shape is None or c.shape[-1] != d // 2 for c in (cos, sin)):
        return None
    if len(cos.shape) != (3 if pos is None else 2):  # [b, s, d/2] rows, or a [positions, d/2] table to gather
        return None
    return x0, cos, sin, pos


def _full_rows(graph: ir.Graph, cos: ir.Value, sin: ir.Value, pos: ir.Value | None, before: ir.Node):
    """RotaryEmbedding's half-width caches as the attention's rotate_half rows [b, s, d]: the cache rows at
    the position ids (when given), each half repeated, since cat(c, c) is what rotate_half multiplies by."""
    rows = []
    for name, cache in (("cos", cos), ("sin", sin)):
        if pos is not None:
            gather = ir.Node("", "Gather", [cache, pos], attributes=[ir.AttrInt64("axis", 0)],
                             name=f"rotary_{name}_rows", num_outputs=1)
            graph.insert_before(before, gather)
            half = gather.outputs[0]
            half.dtype = cache.dtype
            if pos.shape is not None and cache.shape is not None:
                half.shape = ir.Shape([*pos.shape.dims, cache.shape[-1]])
            cache = half
        cat = ir.Node("", "Concat", [cache, cache], attributes=[ir.AttrInt64("axis", -1)],
                      name=f"rotary_{name}_full", num_outputs=1)
        graph.insert_before(before, cat)
        full = cat.outputs[0]
        full.dtype = cache.dtype
        if cache.shape is not None and isinstance(cache.shape[-1], int):
            full.shape = ir.Shape([*cache.shape.dims[:-1], 2 * cache.shape[-1]])
        rows.append(full)
    return rows


def _absorb(m: dict, d: int) -> dict | None:
    """The head transposes of q, k, v and of the output, and rotary on q and k between them, when the exporter
    wrote them around the attention: the kernels then read [b, s, h, d] directly, rotate on the fly (``cos``
    and ``sin`` present) and write [b, s, h, d], so none of those ops runs as a kernel."""
    rq, rk, half = _rotary(m["q"], d), _rotary(m["k"].inputs[1], d), False
    if rq is None and rk is None:  # ONNX's RotaryEmbedding: (x0, cos, sin, position ids) with half-width caches
        rq, rk, half = _rotary_op(m["q"], d), _rotary_op(m["k"].inputs[1], d), True
    if rq is None and rk is None:  # no rotary (GPT-2, OPT, ...): the transposes alone
        rot, q0, k0 = {}, _peel_heads_transpose(m["q"]), _peel_heads_transpose(m["k"].inputs[1])
    elif rq is not None and rk is not None and rq[1:] == rk[1:]:
        rot, q0, k0 = {"cos": rq[1], "sin": rq[2], "half": half, "pos": rq[3] if half else None}, rq[0], rk[0]
    else:
        return None
    v0 = _peel_heads_transpose(m["v"].inputs[1])
    users = [u.node for u in m["out"].uses()]
    if q0 is None or k0 is None or v0 is None or len(users) != 1 or m["out"].is_graph_output() \
            or not _perm(users[0], [0, 2, 1, 3]):
        return None
    return {"q": q0, "k": k0, "v": v0, **rot, "out": users[0].outputs[0]}


def run(model: ir.Model, max_seq: int) -> int:
    """Rewrite every attention over the KV cache; returns the number of layers rewritten."""
    graph = model.graph
    concats = kv_concats(graph)
    if not concats:
        return 0
    matches, misses = attention_match.find(graph, concats)
    used = {id(m["k"]) for m in matches} | {id(m["v"]) for m in matches}
    missing = [n.outputs[0].name for n in concats.values() if id(n) not in used]
    if missing:
        why = "; ".join(misses[:3]) if misses else "no Softmax or Attention reads them"
        raise KVCacheError(f"KV cache outputs {missing[:4]} feed no attention this build recognises "
                           f"(Softmax(q·kᵀ [* scale] [soft-cap] + mask)·v or ONNX Attention over the Concat of "
                           f"past and new): {why}")
    states, widened = [], {}  # (cos, sin, pos) of a RotaryEmbedding -> its full rows, built once for all layers
    for layer, m in enumerate(matches):
        past_k, k_new = m["k"].inputs
        past_v, v_new = m["v"].inputs
        kv_heads = past_k.shape[1]
        q_heads = _q_heads(m["q"], past_k.shape[3])
        if not isinstance(q_heads, int) or not isinstance(kv_heads, int) or q_heads % kv_heads:
            raise KVCacheError(f"attention {layer}: head counts must be static with q heads a multiple of kv heads")
        head = past_k.shape[3]
        fused = _absorb(m, head) if isinstance(head, int) else None
        mask = m["mask"] if m["mask"] is not None else _no_mask(graph)
        inputs = [m["q"], k_new, v_new, mask, past_k, past_v]
        if fused:
            inputs = [fused["q"], fused["k"], fused["v"], mask, past_k, past_v]
            if fused.get("half"):
                key = (id(fused["cos"]), id(fused["sin"]), id(fused["pos"]))
                if key not in widened:
                    widened[key] = _full_rows(graph, fused["cos"], fused["sin"], fused["pos"], m["anchor"])
                inputs += widened[key]
            elif "cos" in fused:
                inputs += [fused["cos"], fused["sin"]]
        node = ir.Node(DOMAIN, "CachedAttention", inputs,
                       attributes=[ir.AttrFloat32("scale", m["scale"]), ir.AttrFloat32("softcap", m["softcap"]),
                                   ir.AttrInt64("q_heads", q_heads),
                                   ir.AttrInt64("kv_heads", kv_heads), ir.AttrInt64("layer", layer),
                                   ir.AttrInt64("bshd", int(fused is not None))],
                       name=f"cached_attention_{layer}", num_outputs=1)
        graph.insert_before(m["anchor"], node)
        out = node.outputs[0]
        replaced = fused["out"] if fused else m["out"]
        out.dtype, out.shape = replaced.dtype, replaced.shape
        replace_value(graph, replaced, out)
        states += [past_k.name, past_v.name]
    keep_states(model, states, set(concats), max_seq)
    return len(matches)


def _q_heads(q: ir.Value, head) -> int | None:
    """q's head count ([b, heads, s, d]): its static dim, or, where the exporter reshaped to (b, s, -1, d)
    (Whisper's decoder), the projection's width over the head size."""
    if q.shape is not None and isinstance(q.shape[1], int):
        return q.shape[1]
    node = q.producer()
    node = node.inputs[0].producer() if _perm(node, [0, 2, 1, 3]) else None
    x = node.inputs[0] if node is not None and node.op_type == "Reshape" else None
    if x is None or x.shape is None or len(x.shape) != 3 or not isinstance(x.shape[2], int) or not isinstance(head, int):
        return None
    return x.shape[2] // head if x.shape[2] % head == 0 else None


def keep_states(model: ir.Model, states: list[str], presents: set, max_seq: int) -> None:
    """Drop the ``presents`` outputs and record the past inputs ``states`` as KV-cache state buffers of
    ``max_seq`` positions (graph metadata, read by the lowerer)."""
    graph = model.graph
    kept = [o for o in graph.outputs if o not in presents]
    graph.outputs.clear()
    graph.outputs.extend(kept)
    past_dims = {str(_input(graph, s).shape[2]) for s in states}
    if len(past_dims) != 1:
        raise KVCacheError(f"past inputs disagree on their sequence dim: {sorted(past_dims)}")
    past_dim = past_dims.pop()
    # dims sized at max_seq in every plan: the past length, and the mask's total length when it has one
    bounded = [past_dim] + [str(v.shape[1]) for v in graph.inputs if v.name == "attention_mask"
                            and v.shape is not None and len(v.shape) == 2 and not isinstance(v.shape[1], int)]
    meta = {"max_seq": int(max_seq), "states": states, "past_dim": past_dim, "bounded": bounded}
    cross = graph.metadata_props.get(CROSS_KEY)  # an encoder-decoder's cross keys/values (graph/seq2seq.py)
    if cross:
        cross = json.loads(cross)
        meta["states"] = states + cross["states"]
        meta["bounds"] = {cross["dim"]: int(cross["max"])}  # buffers sized for the longest source
    graph.metadata_props[META_KEY] = json.dumps(meta)
    if DOMAIN not in model.opset_imports:
        model.opset_imports[DOMAIN] = 1


def _no_mask(graph: ir.Graph) -> ir.Value:
    """An additive mask of one zero, for attentions the exporter wrote without one."""
    return new_initializer(graph, np.zeros((1, 1, 1, 1), np.float32), "no_attention_mask")


def _input(graph: ir.Graph, name: str) -> ir.Value:
    return next(v for v in graph.inputs if v.name == name)


def kv_metadata(model: ir.Model) -> dict | None:
    text = model.graph.metadata_props.get(META_KEY)
    return json.loads(text) if text else None


__all__ = ["run", "is_kv_model", "kv_metadata", "KVCacheError"]
