"""LayerNorm and RMSNorm recognised from their primitive spellings -> one row-reduction kernel each (rules).

- RMSNorm (torch dynamo, Llama/SmolLM2): Pow(x, 2) -> ReduceMean(last axis, keepdims) -> Add(eps) -> Sqrt
  -> Reciprocal -> Mul(x, r) [-> Mul(weight, .)], also with Div(1, .) for Reciprocal, Mul(x, x) for Pow.
- LayerNorm (older exporters): ReduceMean(x) -> Sub(x, mean) = d -> Pow(d, 2) -> ReduceMean -> Add(eps)
  -> Sqrt -> Div(d, .) [-> Mul(., gamma)] [-> Add(., beta)].

They become ``webinfer.RMSNormalization`` / ``webinfer.LayerNormalization`` (ONNX's semantics, axis -1),
lowered by codegen/kernels/norm.py: one workgroup per row, statistics and normalization in one kernel.
A missing weight becomes a ones vector. Only the last axis of a float tensor is matched, the weight and
bias must be constants of that axis' length, and every intermediate must stay inside the pattern.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ...opschema import WEBINFER_DOMAIN
from ._program import FLOAT_TYPES, scalar, use_webinfer_domain
from ._util import new_initializer, replace_value, sole_consumer
from .match import const_vector, in_order, is_op, last_axis_mean, near, other, square_of
from .rules import Match, Rule, pass_of


def _inv_sqrt_chain(mean2: ir.Node) -> tuple[list[ir.Node], float, ir.Value] | None:
    """ReduceMean -> Add(eps) -> Sqrt: the nodes, eps and the root."""
    add = sole_consumer(mean2.outputs[0])
    eps = scalar(other(add, mean2.outputs[0])) if is_op(add, "Add") else None
    sqrt = sole_consumer(add.outputs[0]) if eps is not None else None
    if not is_op(sqrt, "Sqrt"):
        return None
    return [add, sqrt], eps, sqrt.outputs[0]


def _affine(y: ir.Value, n, members: list, op: str) -> tuple[ir.Value, ir.Value] | None:
    """An optional trailing Mul/Add by a constant vector of the normalized axis: (new y, the vector)."""
    nxt = sole_consumer(y)
    w = other(nxt, y) if is_op(nxt, op) else None
    if w is None or not const_vector(w, n):
        return None
    members.append(nxt)
    return nxt.outputs[0], w


def _with_affine(anchor: ir.Node, members: list[ir.Node], x: ir.Value, eps: float, bias: bool) -> Match:
    """The match, extended by the optional weight (and for LayerNorm the bias) after the normalization."""
    n = x.shape[-1] if x.shape is not None else None
    y = members[-1].outputs[0]
    found = _affine(y, n, members, "Mul")
    y, weight = found if found else (y, None)
    b = None
    if bias:
        found = _affine(y, n, members, "Add")
        y, b = found if found else (y, None)
    return Match(members, {"anchor": anchor, "x": x, "eps": eps, "weight": weight, "bias": b, "y": y})


def _rms(square: ir.Node) -> Match | None:
    x = square.inputs[0]
    mean = sole_consumer(square.outputs[0])
    if not square_of(square, x) or not last_axis_mean(mean, square.outputs[0]):
        return None
    chain = _inv_sqrt_chain(mean)
    if chain is None:
        return None
    nodes, eps, s = chain
    inv = sole_consumer(s)
    if is_op(inv, "Reciprocal") or (is_op(inv, "Div") and inv.inputs[1] is s and near(scalar(inv.inputs[0]), 1.0)):
        scale = sole_consumer(inv.outputs[0])
        if not is_op(scale, "Mul") or other(scale, inv.outputs[0]) is not x:
            return None
        return _with_affine(square, [square, mean, *nodes, inv, scale], x, eps, False)
    if is_op(inv, "Div") and inv.inputs[1] is s and inv.inputs[0] is x:
        return _with_affine(square, [square, mean, *nodes, inv], x, eps, False)
    return None


def _layer_norm(mean: ir.Node) -> Match | None:
    x = mean.inputs[0]
    if not last_axis_mean(mean, x):
        return None
    sub = sole_consumer(mean.outputs[0])
    if not is_op(sub, "Sub") or sub.inputs[0] is not x or sub.inputs[1] is not mean.outputs[0]:
        return None
    d = sub.outputs[0]
    users = {id(u.node): u.node for u in d.uses()}
    if len(users) != 2 or d.is_graph_output():
        return None
    square = next((u for u in users.values() if square_of(u, d)), None)
    div = next((u for u in users.values() if is_op(u, "Div") and u.inputs[0] is d), None)
    mean2 = sole_consumer(square.outputs[0]) if square is not None else None
    if div is None or not last_axis_mean(mean2, square.outputs[0]):
        return None
    chain = _inv_sqrt_chain(mean2)
    if chain is None or div.inputs[1] is not chain[2]:
        return None
    return _with_affine(mean, [mean, sub, square, mean2, *chain[0], div], x, chain[1], True)


def _float_row(m: Match) -> bool:
    """A float tensor whose last (normalized) axis has a static length."""
    x = m["x"]
    return m["anchor"].outputs[0].dtype in FLOAT_TYPES and isinstance(x.shape[-1] if x.shape else None, int)


def _replacement(op: str):
    def replace(model: ir.Model, m: Match) -> None:
        graph, x, weight = model.graph, m["x"], m["weight"]
        use_webinfer_domain(model)
        if weight is None:
            weight = new_initializer(graph, np.ones(x.shape[-1], dtype=x.dtype.numpy()), f"{op.lower()}_ones")
        inputs = [x, weight] + ([m["bias"]] if m["bias"] is not None else [])
        members = in_order(graph, m.nodes)
        norm = ir.Node(WEBINFER_DOMAIN, op, inputs, name=members[-1].name, num_outputs=1,
                       attributes=[ir.AttrInt64("axis", -1), ir.AttrFloat32("epsilon", float(m["eps"]))])
        graph.insert_before(members[-1], norm)
        y = m["y"]
        norm.outputs[0].dtype, norm.outputs[0].shape = y.dtype, y.shape
        replace_value(graph, y, norm.outputs[0])
        for n in reversed(members):
            graph.remove(n, safe=True)
    return replace


RMS_NORM = Rule("rms_norm", ("Pow", "Mul"), _rms, _float_row, _replacement("RMSNormalization"))
LAYER_NORM = Rule("layer_norm", ("ReduceMean",), _layer_norm, _float_row, _replacement("LayerNormalization"))
RULES = (RMS_NORM, LAYER_NORM)

run = pass_of(*RULES)
