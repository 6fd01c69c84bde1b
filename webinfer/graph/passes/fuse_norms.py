"""LayerNorm and RMSNorm recognised from their primitive spellings -> one row-reduction kernel each.

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
from ._util import const, int_attr, ints_attr, new_initializer, replace_value
from .fuse_activations import _in_order, _is, _near, _only_user, _other


def _last_axis_mean(node: ir.Node | None, x: ir.Value) -> bool:
    """ReduceMean of ``x`` over its last axis only, keeping dims."""
    if not _is(node, "ReduceMean") or node.inputs[0] is not x or int_attr(node, "keepdims", 1) != 1:
        return False
    axes = ints_attr(node, "axes")
    if axes is None and len(node.inputs) > 1:
        c = const(node.inputs[1])
        axes = None if c is None else [int(a) for a in c.reshape(-1)]
    rank = len(x.shape) if x.shape is not None else None
    return axes is not None and len(axes) == 1 and rank is not None and axes[0] in (-1, rank - 1)


def _square_of(node: ir.Node | None, x: ir.Value) -> bool:
    if _is(node, "Pow"):
        return node.inputs[0] is x and _near(scalar(node.inputs[1]), 2.0)
    return _is(node, "Mul") and node.inputs[0] is x and node.inputs[1] is x


def _inv_sqrt_chain(mean2: ir.Node) -> tuple[list[ir.Node], float, ir.Value] | None:
    """ReduceMean -> Add(eps) -> Sqrt [-> Reciprocal | Div(1, .)]: the nodes, eps and the last value."""
    add = _only_user(mean2.outputs[0])
    eps = scalar(_other(add, mean2.outputs[0])) if _is(add, "Add") else None
    sqrt = _only_user(add.outputs[0]) if eps is not None else None
    if not _is(sqrt, "Sqrt"):
        return None
    return [add, sqrt], eps, sqrt.outputs[0]


def _vector(value: ir.Value | None, n) -> bool:
    c = const(value) if value is not None else None
    return c is not None and isinstance(n, int) and c.size == n and c.shape[-1:] == (n,) and c.dtype.kind == "f"


def _affine(graph: ir.Graph, y: ir.Value, n, members: list, op: str) -> tuple[ir.Value, ir.Value] | None:
    """An optional trailing Mul/Add by a constant vector of the normalized axis: (new y, the vector)."""
    nxt = _only_user(y)
    w = _other(nxt, y) if _is(nxt, op) else None
    if w is None or not _vector(w, n):
        return None
    members.append(nxt)
    return nxt.outputs[0], w


def match_rms(square: ir.Node) -> tuple[list[ir.Node], ir.Value, float] | None:
    x = square.inputs[0]
    mean = _only_user(square.outputs[0])
    if not _square_of(square, x) or not _last_axis_mean(mean, square.outputs[0]):
        return None
    chain = _inv_sqrt_chain(mean)
    if chain is None:
        return None
    nodes, eps, s = chain
    inv = _only_user(s)
    if _is(inv, "Reciprocal") or (_is(inv, "Div") and inv.inputs[1] is s and _near(scalar(inv.inputs[0]), 1.0)):
        scale = _only_user(inv.outputs[0])
        if not _is(scale, "Mul") or _other(scale, inv.outputs[0]) is not x:
            return None
        return [square, mean, *nodes, inv, scale], x, eps
    if _is(inv, "Div") and inv.inputs[1] is s and inv.inputs[0] is x:
        return [square, mean, *nodes, inv], x, eps
    return None


def match_layer_norm(mean: ir.Node) -> tuple[list[ir.Node], ir.Value, float] | None:
    x = mean.inputs[0]
    if not _last_axis_mean(mean, x):
        return None
    sub = _only_user(mean.outputs[0])
    if not _is(sub, "Sub") or sub.inputs[0] is not x or sub.inputs[1] is not mean.outputs[0]:
        return None
    d = sub.outputs[0]
    users = {id(u.node): u.node for u in d.uses()}
    if len(users) != 2 or d.is_graph_output():
        return None
    square = next((u for u in users.values() if _square_of(u, d)), None)
    div = next((u for u in users.values() if _is(u, "Div") and u.inputs[0] is d), None)
    mean2 = _only_user(square.outputs[0]) if square is not None else None
    if div is None or not _last_axis_mean(mean2, square.outputs[0]):
        return None
    chain = _inv_sqrt_chain(mean2)
    if chain is None or div.inputs[1] is not chain[2]:
        return None
    return [mean, sub, square, mean2, *chain[0], div], x, chain[1]


def _rewrite(model: ir.Model, members: list, x: ir.Value, eps: float, op: str) -> None:
    graph = model.graph
    n = x.shape[-1] if x.shape is not None else None
    y = members[-1].outputs[0]
    found = _affine(graph, y, n, members, "Mul")
    y, weight = found if found else (y, None)
    bias = None
    if op == "LayerNormalization":
        found = _affine(graph, y, n, members, "Add")
        y, bias = found if found else (y, None)
    if weight is None:
        weight = new_initializer(graph, np.ones(n, dtype=x.dtype.numpy()), f"{op.lower()}_ones")
    inputs = [x, weight] + ([bias] if bias is not None else [])
    members = _in_order(graph, members)
    norm = ir.Node(WEBINFER_DOMAIN, op, inputs, name=members[-1].name, num_outputs=1,
                   attributes=[ir.AttrInt64("axis", -1), ir.AttrFloat32("epsilon", float(eps))])
    graph.insert_before(members[-1], norm)
    norm.outputs[0].dtype, norm.outputs[0].shape = y.dtype, y.shape
    replace_value(graph, y, norm.outputs[0])
    for m in reversed(members):
        graph.remove(m, safe=True)


def run(model: ir.Model) -> int:
    graph = model.graph
    count = 0
    for node in list(graph):
        if node.graph is not graph or not node.outputs or node.outputs[0].dtype not in FLOAT_TYPES:
            continue
        found = match_rms(node) if node.op_type in ("Pow", "Mul") else None
        op = "RMSNormalization"
        if found is None and node.op_type == "ReduceMean":
            found, op = match_layer_norm(node), "LayerNormalization"
        if found is None or not isinstance(found[1].shape[-1] if found[1].shape else None, int):
            continue
        use_webinfer_domain(model)
        _rewrite(model, *found, op)
        count += 1
    return count
