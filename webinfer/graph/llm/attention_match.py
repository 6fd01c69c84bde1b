"""Find the attentions over a decoder's KV cache, in each spelling exporters write, or say why one is not.

Spellings matched (``q``, ``k``, ``v`` in [batch, heads, seq, head_dim]; k and v reach the past/present Concat
through views such as the grouped-query Unsqueeze/Expand/Reshape):
- primitives, as torch's sdpa decomposition and optimum write them: ``Softmax(q·kᵀ + mask)``, with the scale
  on q and/or kᵀ (``sqrt(scale)`` on each) or on the scores after the MatMul (transformers' eager attention),
  an optional tanh soft-cap ``c * tanh(s / c)`` on the scores (Gemma 2), an optional NaN guard after the
  Softmax, then ``probs · v``;
- ONNX's own ``Attention`` (opset 23, what torch writes from sdpa at opset 23), 4-D, with its ``scale``
  and ``softcap`` attributes.

``find(graph, concats)`` returns the matches and, for every Softmax or Attention that touches the cache but
did not match, the reason (``misses``), so a refused model gets a message naming the failed step.
"""

from __future__ import annotations

import math

import onnx_ir as ir

from ..passes._util import const, int_attr

_VIEW_OPS = {"Reshape", "Transpose", "Expand", "Unsqueeze", "Squeeze", "Identity"}


class Miss(str):
    """Why one candidate attention did not match (a sentence fragment)."""


def _op(value: ir.Value | None, *ops: str) -> ir.Node | None:
    node = value.producer() if value is not None else None
    return node if node is not None and node.op_type in ops and node.domain in ("", "ai.onnx") else None


def _name(node: ir.Node) -> str:
    return f"{node.op_type} {node.name!r}" if node.name else node.op_type


def through_views(value: ir.Value, concats: dict) -> ir.Node | None:
    """Follow a chain of view-like ops back to one of the KV Concat nodes."""
    for _ in range(12):
        node = value.producer()
        if node is None:
            return None
        if node in concats.values():
            return node
        if node.op_type not in _VIEW_OPS or node.domain != "":
            return None
        value = node.inputs[0]
    return None


def scalar(value: ir.Value | None) -> float | None:
    c = const(value)
    return float(c.reshape(-1)[0]) if c is not None and c.size == 1 and c.dtype.kind == "f" else None


def unscale(value: ir.Value) -> tuple[ir.Value, float]:
    """x * c or x / c (c a scalar constant) -> (x, c or 1/c); anything else -> (value, 1)."""
    node = _op(value, "Mul", "Div")
    if node is None:
        return value, 1.0
    if node.op_type == "Div":
        c = scalar(node.inputs[1])
        return (node.inputs[0], 1.0 / c) if c else (value, 1.0)
    for i in (0, 1):
        c = scalar(node.inputs[1 - i])
        if c is not None:
            return node.inputs[i], c
    return value, 1.0


def _softcap(value: ir.Value) -> tuple[ir.Value, float]:
    """c * tanh(x / c) -> (x, c); anything else -> (value, 0)."""
    mul = _op(value, "Mul")
    if mul is None:
        return value, 0.0
    for i in (0, 1):
        cap = scalar(mul.inputs[1 - i])
        tanh = _op(mul.inputs[i], "Tanh")
        if cap is None or tanh is None:
            continue
        inner, factor = unscale(tanh.inputs[0])
        if cap > 0 and math.isclose(factor * cap, 1.0, rel_tol=1e-6):
            return inner, cap
    return value, 0.0


def score_matmul(value: ir.Value) -> tuple[ir.Node | None, float, float]:
    """The q·kᵀ MatMul under an optional soft-cap and scales: (matmul, scale, softcap)."""
    value, cap = _softcap(value)
    scale = 1.0
    for _ in range(4):
        value, c = unscale(value)
        if c == 1.0:
            break
        scale *= c
    return _op(value, "MatMul"), scale, cap


def match_softmax(softmax: ir.Node, concats: dict) -> dict | Miss:
    if int_attr(softmax, "axis", -1) not in (-1, 3):
        return Miss("the Softmax is not over the last axis")
    add = _op(softmax.inputs[0], "Add")
    candidates = [(add.inputs[i], add.inputs[1 - i]) for i in (0, 1)] if add is not None else []
    candidates.append((softmax.inputs[0], None))
    found = next(((score_matmul(s), mask) for s, mask in candidates if score_matmul(s)[0] is not None), None)
    if found is None:
        return Miss("its input is not q·kᵀ (a MatMul, optionally scaled and soft-capped) plus a mask")
    (scores, scale, cap), mask = found
    q, sq = unscale(scores.inputs[0])
    kt, sk = unscale(scores.inputs[1])
    k_concat = through_views(kt, concats)
    if k_concat is None:
        return Miss("the keys of q·kᵀ do not come from a past/present Concat through views")
    probs = softmax.outputs[0]
    users = [u.node for u in probs.uses()]
    isnan = [n for n in users if n.op_type == "IsNaN"]
    if isnan:  # the exporter's guard for fully masked rows: Where(IsNaN(p), 0, p)
        where = [u.node for u in isnan[0].outputs[0].uses()]
        if len(where) != 1 or where[0].op_type != "Where" or where[0].inputs[2] is not probs:
            return Miss("the IsNaN after the Softmax is not the guard Where(IsNaN(p), 0, p)")
        if any(n is not isnan[0] and n is not where[0] for n in users):
            return Miss("the probabilities have other users than the NaN guard")
        probs, users = where[0].outputs[0], [u.node for u in where[0].outputs[0].uses()]
    if len(users) != 1 or users[0].op_type != "MatMul" or users[0].inputs[0] is not probs:
        return Miss("the probabilities are not multiplied by v in one MatMul")
    out_mm = users[0]
    v_concat = through_views(out_mm.inputs[1], concats)
    if v_concat is None or v_concat is k_concat:
        return Miss("the values of probs·v do not come from a past/present Concat through views")
    return {"q": q, "scale": scale * sq * sk, "softcap": cap, "mask": mask, "k": k_concat, "v": v_concat,
            "out": out_mm.outputs[0], "anchor": out_mm}


def match_attention_op(node: ir.Node, concats: dict) -> dict | Miss:
    """ONNX Attention (opset 23) with 4-D q, k, v and the cache spelled as Concat outside it."""
    q, k, v = node.inputs[:3]
    mask = node.inputs[3] if len(node.inputs) > 3 else None
    if len(node.inputs) > 4 and any(x is not None for x in node.inputs[4:]):
        return Miss("Attention's own past_key/past_value inputs are not supported (only a Concat cache)")
    if any(o.uses() or o.is_graph_output() for o in node.outputs[1:]):
        return Miss("Attention's present_key/present_value/qk outputs are used")
    if q.shape is None or len(q.shape) != 4:
        return Miss("Attention's q is not 4-D [batch, heads, seq, head_dim]")
    if int_attr(node, "is_causal", 0):
        return Miss("Attention with is_causal=1 (the rewrite needs the mask as an input)")
    k_concat, v_concat = through_views(k, concats), through_views(v, concats)
    if k_concat is None or v_concat is None or k_concat is v_concat:
        return Miss("Attention's k or v does not come from a past/present Concat through views")
    head = q.shape[3]
    scale_attr = node.attributes.get("scale")
    if scale_attr is not None:
        scale = scale_attr.as_float()
    elif isinstance(head, int):
        scale = 1.0 / math.sqrt(head)
    else:
        return Miss("Attention has no scale and its head size is not static")
    cap = node.attributes.get("softcap")
    return {"q": q, "scale": scale, "softcap": cap.as_float() if cap is not None else 0.0, "mask": mask,
            "k": k_concat, "v": v_concat, "out": node.outputs[0], "anchor": node}


def _touches_cache(node: ir.Node, concats: dict, depth: int = 10) -> bool:
    """Whether a Concat of the cache is among the node's inputs' producers (a few levels up)."""
    frontier, seen = [node], set()
    for _ in range(depth):
        nxt = []
        for n in frontier:
            for v in n.inputs:
                p = v.producer() if v is not None else None
                if p is None or id(p) in seen:
                    continue
                if p in concats.values():
                    return True
                seen.add(id(p))
                nxt.append(p)
        frontier = nxt
    return False


def find(graph: ir.Graph, concats: dict) -> tuple[list[dict], list[str]]:
    """Every attention over the cache, in graph order, and why each other candidate was refused."""
    matches, misses = [], []
    for node in graph:
        if node.domain not in ("", "ai.onnx") or node.op_type not in ("Softmax", "Attention"):
            continue
        m = match_softmax(node, concats) if node.op_type == "Softmax" else match_attention_op(node, concats)
        if isinstance(m, Miss):
            if node.op_type == "Attention" or _touches_cache(node, concats):
                misses.append(f"{_name(node)}: {m}")
        else:
            matches.append(m)
    return matches, misses
