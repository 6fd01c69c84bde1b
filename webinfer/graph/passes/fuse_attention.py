"""Attention spelled in primitives (encoders: BERT-class, vision transformers) -> one ``webinfer.Attention`` (a rule).

Matched, as exporters write it: ``Softmax(q·kᵀ [* scale] [+ mask]) · v`` over 4-D [batch, heads, seq, head]
operands, the scale as Mul/Div on the scores or on q and kᵀ (``graph/llm/attention_match`` reads that part,
shared with the KV-cache rewrite), the Softmax over the last axis, every intermediate used only inside the
pattern. The head split ``Transpose(Reshape(x, [b, s, heads, head]), [0, 2, 1, 3])`` of q, k (perm
[0, 2, 3, 1] for kᵀ) and v is absorbed: the kernel reads the 3-D projection through strides, and the head
merge ``Transpose(out, [0, 2, 1, 3])`` before a Reshape is absorbed by writing [b, s, heads * head]
directly. Operands that are not head splits are read as the 4-D tensors they are (kᵀ given whole is
transposed back once). The mask's last axis must be the keys' axis (a mask broadcast over keys is left).

``webinfer.Attention`` has ONNX Attention's semantics (opset 23: ``scale``, ``softcap``, ``q_num_heads`` /
``kv_num_heads`` for 3-D inputs) except that q, k and v may each be 3-D or 4-D; it is lowered by
codegen/kernels/attention.py for every kernel class.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ...opschema import WEBINFER_DOMAIN
from ..llm.attention_match import score_matmul, unscale
from ._program import FLOAT_TYPES, use_webinfer_domain
from ._util import (
    const,
    constant_projection,
    ints_attr,
    new_initializer,
    remove_if_dead,
    replace_value,
    sole_consumer,
)
from ._util import onnx_op as _op
from .rules import Match, Rule, pass_of


def _dims(value: ir.Value | None) -> tuple | None:
    return None if value is None or value.shape is None else tuple(value.shape.dims)


def _same_dim(a, b) -> bool:
    """Known equal: the same int or the same named symbolic dim."""
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    return a is not None and b is not None and a.value is not None and a.value == b.value


def _softmax_last_axis(node: ir.Node, opset: int) -> bool:
    dims = _dims(node.inputs[0])
    a = node.attributes.get("axis")
    axis = a.as_int() if a is not None else (-1 if opset >= 13 else 1)
    return dims is not None and axis in (-1, len(dims) - 1)


def _head_split(value: ir.Value, perm: list[int]) -> tuple[ir.Value, int] | None:
    """``Transpose(Reshape(x, [b, s, heads, head]), perm)`` with x 3-D [b, s, heads * head], used only here:
    (x, heads)."""
    tr = _op(value, "Transpose")
    if tr is None or ints_attr(tr, "perm") != perm or sole_consumer(value) is None:
        return None
    rs = _op(tr.inputs[0], "Reshape")
    if rs is None or sole_consumer(tr.inputs[0]) is not tr:
        return None
    x, split = rs.inputs[0], _dims(rs.outputs[0])
    xd = _dims(x)
    if xd is None or split is None or len(xd) != 3 or len(split) != 4:
        return None
    heads, head = split[2], split[3]
    if not (isinstance(heads, int) and isinstance(head, int) and xd[2] == heads * head):
        return None
    if not (_same_dim(xd[0], split[0]) and _same_dim(xd[1], split[1])):
        return None
    return x, heads


def _keys(graph: ir.Graph, kt: ir.Value, before: ir.Node) -> tuple[ir.Value, int | None]:
    """k from kᵀ [b, h, head, keys]: a head split of 3-D k, the input of Transpose(k, [0, 1, 3, 2]), or a
    Transpose inserted here."""
    split = _head_split(kt, [0, 2, 3, 1])
    if split is not None:
        return split
    tr = _op(kt, "Transpose")
    if tr is not None and ints_attr(tr, "perm") == [0, 1, 3, 2] and sole_consumer(kt) is not None:
        return tr.inputs[0], None
    back = ir.Node("", "Transpose", [kt], attributes=[ir.AttrInt64s("perm", [0, 1, 3, 2])], num_outputs=1)
    graph.insert_before(before, back)
    d = _dims(kt)
    back.outputs[0].dtype = kt.dtype
    back.outputs[0].shape = ir.Shape([d[0], d[1], d[3], d[2]]) if d is not None and len(d) == 4 else None
    return back.outputs[0], None


def _mask_fits(mask: ir.Value | None, scores: ir.Value) -> bool:
    """A float mask broadcastable to the scores whose last axis is the keys' (not broadcast over keys)."""
    if mask is None:
        return True
    md, sd = _dims(mask), _dims(scores)
    if md is None or sd is None or len(md) > 4 or mask.dtype not in FLOAT_TYPES or not md:
        return False
    if not _same_dim(md[-1], sd[-1]):
        return False
    return all(d == 1 or _same_dim(d, s) for d, s in zip(md[::-1], sd[::-1]))


def _private(values: list[ir.Value]) -> bool:
    return all(sole_consumer(v) is not None for v in values)


def _between(value: ir.Value, mm: ir.Node) -> list[ir.Value] | None:
    """The values from the scores MatMul's output up to ``value`` (scale and soft-cap steps), or None."""
    chain = []
    for _ in range(8):
        chain.append(value)
        node = value.producer()
        if node is mm:
            return chain
        if node is None or node.op_type not in ("Mul", "Div", "Tanh"):
            return None
        value = next((i for i in node.inputs if i is not None and const(i) is None), None)
        if value is None:
            return None
    return None


def _pattern(softmax: ir.Node) -> Match | None:
    """Softmax(q·kᵀ [scaled, soft-capped] [+ mask]) read by one MatMul with v."""
    probs = softmax.outputs[0]
    out_mm = sole_consumer(probs)
    if out_mm is None or out_mm.op_type != "MatMul" or out_mm.domain not in ("", "ai.onnx") \
            or out_mm.inputs[0] is not probs:
        return None
    add = _op(softmax.inputs[0], "Add")
    candidates = [(add.inputs[i], add.inputs[1 - i]) for i in (0, 1)] if add is not None else []
    candidates.append((softmax.inputs[0], None))
    found = next(((s, mask, *score_matmul(s)) for s, mask in candidates if score_matmul(s)[0] is not None), None)
    if found is None:
        return None
    s, mask, mm, scale, cap = found
    q, sq = unscale(mm.inputs[0])
    kt, sk = unscale(mm.inputs[1])
    opset = softmax.graph.opset_imports.get("", 1)
    return Match([softmax, out_mm, mm], {"q": q, "kt": kt, "v": out_mm.inputs[1], "mask": mask,
                                         "scale": scale * sq * sk, "softcap": cap, "out": out_mm, "softmax": softmax,
                                         "scores": s, "mm": mm, "opset": opset})


def _condition(m: Match) -> bool:
    """Float scores, the Softmax over their last axis; q, kᵀ and v 4-D with the same heads and batch (MQA or
    a broadcast batch are left to the primitives); a mask that fits; every intermediate private."""
    softmax, mm, q, kt, mask = m["softmax"], m["mm"], m["q"], m["kt"], m["mask"]
    if not _softmax_last_axis(softmax, m["opset"]) or softmax.outputs[0].dtype not in FLOAT_TYPES:
        return False
    dims = [_dims(x) for x in (q, kt, m["v"])]
    if any(d is None or len(d) != 4 for d in dims) or not _mask_fits(mask, mm.outputs[0]):
        return False
    heads = {d[1] for d in dims}
    if len(heads) != 1 or not isinstance(dims[0][1], int) or not all(_same_dim(d[0], dims[0][0]) for d in dims):
        return False
    inner = _between(m["scores"], mm)
    scaled = [x for x, y in ((mm.inputs[0], q), (mm.inputs[1], kt)) if x is not y]
    return inner is not None and _private([*inner, *scaled] + ([softmax.inputs[0]] if mask is not None else []))


def _merge_target(out: ir.Node) -> ir.Node | None:
    """The Transpose [0, 2, 1, 3] after probs·v whose only user is a Reshape (the head merge)."""
    tr = sole_consumer(out.outputs[0])
    if tr is None or tr.op_type != "Transpose" or ints_attr(tr, "perm") != [0, 2, 1, 3]:
        return None
    rs = sole_consumer(tr.outputs[0])
    return tr if rs is not None and rs.op_type == "Reshape" and rs.inputs[0] is tr.outputs[0] else None


def rewrite(graph: ir.Graph, m: Match) -> None:
    out_mm = m["out"]
    q3 = _head_split(m["q"], [0, 2, 1, 3])
    v3 = _head_split(m["v"], [0, 2, 1, 3])
    merge = _merge_target(out_mm) if q3 is not None else None
    q, q_heads = q3 if merge is not None else (m["q"], None)
    k, kv_heads = _keys(graph, m["kt"], out_mm)
    v, v_heads = v3 if v3 is not None else (m["v"], None)
    attrs = [ir.AttrFloat32("scale", float(m["scale"]))]
    if m["softcap"]:
        attrs.append(ir.AttrFloat32("softcap", float(m["softcap"])))
    if q_heads is not None:
        attrs.append(ir.AttrInt64("q_num_heads", q_heads))
    if kv_heads is not None or v_heads is not None:
        attrs.append(ir.AttrInt64("kv_num_heads", kv_heads if kv_heads is not None else v_heads))
    anchor = merge if merge is not None else out_mm
    qkv = _merged_projection(graph, anchor, q, k, v, q_heads, kv_heads) if v_heads is not None else None
    if qkv is not None:
        q, k, v = qkv, None, None
        attrs.append(ir.AttrInt64("qkv_packed", 1))
    inputs = [q, k, v] + ([m["mask"]] if m["mask"] is not None else [])
    node = ir.Node(WEBINFER_DOMAIN, "Attention", inputs, attributes=attrs, name=out_mm.name or m["softmax"].name,
                   num_outputs=1)
    graph.insert_before(anchor, node)
    y = node.outputs[0]
    y.dtype = out_mm.outputs[0].dtype
    if merge is not None:
        qd, od = _dims(q), _dims(out_mm.outputs[0])
        y.shape = ir.Shape([qd[0], qd[1], od[1] * od[3]]) if isinstance(od[1], int) and isinstance(od[3], int) \
            else None
        rs = sole_consumer(merge.outputs[0])
        rs.replace_input_with(0, y)
    else:
        y.shape = out_mm.outputs[0].shape
        replace_value(graph, out_mm.outputs[0], y)
    _sweep(graph, [merge, out_mm])


def _merged_projection(graph: ir.Graph, before: ir.Node, q: ir.Value, k: ir.Value, v: ir.Value, q_heads: int,
                       kv_heads: int) -> ir.Value | None:
    """q, k and v projected from one input with constant weights -> one MatMul (+ bias) writing concat(q, k, v)
    along the last axis, or None when they are not (the three projections stay)."""
    found = [constant_projection(x) for x in (q, k, v)]
    if any(f is None for f in found) or len({id(f[0]) for f in found}) != 1 or q_heads is None or kv_heads is None:
        return None
    ws = [f[1] for f in found]
    head = ws[0].shape[1] // q_heads
    if len({w.dtype for w in ws}) != 1 or len({w.shape[0] for w in ws}) != 1 or ws[0].shape[1] != q_heads * head \
            or any(w.shape[1] != kv_heads * head for w in ws[1:]):
        return None
    a = found[0][0]
    w = new_initializer(graph, np.concatenate(ws, axis=1), "qkv_weight")
    mm = ir.Node("", "MatMul", [a, w], num_outputs=1, name=f"{before.name or 'attention'}_qkv")
    graph.insert_before(before, mm)
    out = mm.outputs[0]
    if any(f[2] is not None for f in found):
        bias = np.concatenate([f[2] if f[2] is not None else np.zeros(x.shape[1], x.dtype) for f, x in zip(found, ws)])
        add = ir.Node("", "Add", [out, new_initializer(graph, bias, "qkv_bias")], num_outputs=1)
        graph.insert_before(before, add)
        out = add.outputs[0]
    dims = _dims(q)
    mm.outputs[0].dtype = out.dtype = q.dtype
    mm.outputs[0].shape = out.shape = ir.Shape([dims[0], dims[1], sum(x.shape[1] for x in ws)])
    return out


def _sweep(graph: ir.Graph, roots: list) -> None:
    """Remove the nodes left without users, walking up from ``roots``."""
    todo = [r for r in roots if r is not None]
    while todo:
        node = todo.pop()
        producers = [i.producer() for i in node.inputs if i is not None]
        if remove_if_dead(graph, node):
            todo.extend(p for p in producers if p is not None and p.graph is graph)


def _replacement(model: ir.Model, m: Match) -> None:
    use_webinfer_domain(model)
    rewrite(model.graph, m)


ATTENTION = Rule("attention", ("Softmax",), _pattern, _condition, _replacement)
RULES = (ATTENTION,)
run = pass_of(*RULES)
