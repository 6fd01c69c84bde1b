"""GELU and SiLU recognised from their primitive spellings -> ``webinfer.Gelu`` / ``webinfer.Swish``.

- GELU, erf form (BERT, torch.onnx): ``0.5 * x * (1 + Erf(x / sqrt(2)))``, written by exporters as
  Div(x, 1.4142) or Mul(x, 0.7071) -> Erf -> Add(1) -> Mul(x) -> Mul(0.5), or with the 0.5 applied to x
  first. One op evaluates erf once instead of five kernels' worth of loads and stores.
- SiLU (Llama's MLP, torch dynamo): Sigmoid(x) -> Mul(x, s) becomes Swish(x, alpha=1).

The new ops carry ONNX's semantics (Gelu of opset 20, Swish of opset 24) in webinfer's domain, so any
model opset can hold them; they fuse further like any op of the elementwise table. Every intermediate
must be used only inside the pattern (x itself may have other users).
"""

from __future__ import annotations

import math

import onnx_ir as ir

from ...opschema import WEBINFER_DOMAIN
from ._program import scalar, use_webinfer_domain
from ._util import replace_value

_TOL = 1e-4


def _only_user(value: ir.Value) -> ir.Node | None:
    uses = list(value.uses())
    if len(uses) != 1 or value.is_graph_output():
        return None
    return uses[0].node


def _other(node: ir.Node, value: ir.Value) -> ir.Value | None:
    """The other input of a binary node that reads ``value`` (None if not binary or reads it twice)."""
    if len(node.inputs) != 2 or (node.inputs[0] is value) == (node.inputs[1] is value):
        return None
    return node.inputs[1] if node.inputs[0] is value else node.inputs[0]


def _is(node: ir.Node | None, op: str) -> bool:
    return node is not None and node.domain in ("", "ai.onnx") and node.op_type == op


def _near(v: float | None, want: float) -> bool:
    return v is not None and abs(v - want) <= _TOL * abs(want)


def _replace(graph: ir.Graph, members: list[ir.Node], op: str, x: ir.Value, **attrs) -> None:
    last = members[-1]
    node = ir.Node(WEBINFER_DOMAIN, op, [x], attributes=[ir.Attr(k, t, v) for k, (t, v) in attrs.items()],
                   name=last.name, num_outputs=1)
    graph.insert_before(last, node)
    new, old = node.outputs[0], last.outputs[0]
    new.dtype, new.shape = old.dtype, old.shape
    replace_value(graph, old, new)
    for m in reversed(members):
        graph.remove(m, safe=True)


def match_gelu(erf: ir.Node) -> tuple[list[ir.Node], ir.Value] | None:
    scale = erf.inputs[0].producer() if erf.inputs[0] is not None else None
    if not (_is(scale, "Div") or _is(scale, "Mul")) or _only_user(erf.inputs[0]) is not erf:
        return None
    x = scale.inputs[0]
    c = scalar(scale.inputs[1])
    if _is(scale, "Mul") and c is None:
        x, c = scale.inputs[1], scalar(scale.inputs[0])
    if x is None or not (_near(c, math.sqrt(2)) if _is(scale, "Div") else _near(c, 1 / math.sqrt(2))):
        return None
    add = _only_user(erf.outputs[0])
    if not _is(add, "Add") or not _near(scalar(_other(add, erf.outputs[0])), 1.0):
        return None
    mul = _only_user(add.outputs[0])
    other = _other(mul, add.outputs[0]) if _is(mul, "Mul") else None
    if other is None:
        return None
    if other is x:  # (x * (1 + erf)) * 0.5
        half = _only_user(mul.outputs[0])
        if not _is(half, "Mul") or not _near(scalar(_other(half, mul.outputs[0])), 0.5):
            return None
        return [scale, erf, add, mul, half], x
    pre = other.producer()  # (0.5 * x) * (1 + erf)
    if not _is(pre, "Mul") or _only_user(other) is not mul or _other(pre, x) is None:
        return None
    if not _near(scalar(_other(pre, x)), 0.5):
        return None
    return [scale, erf, add, pre, mul], x


def match_silu(sig: ir.Node) -> tuple[list[ir.Node], ir.Value] | None:
    x = sig.inputs[0]
    mul = _only_user(sig.outputs[0])
    if x is None or not _is(mul, "Mul") or _other(mul, sig.outputs[0]) is not x:
        return None
    return [sig, mul], x


def run(model: ir.Model) -> int:
    graph = model.graph
    count = 0
    for node in list(graph):
        if node.graph is not graph:
            continue
        if _is(node, "Erf") and (found := match_gelu(node)):
            members, x = found
            _replace(graph, _in_order(graph, members), "Gelu", x, approximate=(ir.AttributeType.STRING, "none"))
        elif _is(node, "Sigmoid") and (found := match_silu(node)):
            _replace(graph, found[0], "Swish", found[1], alpha=(ir.AttributeType.FLOAT, 1.0))
        else:
            continue
        use_webinfer_domain(model)
        count += 1
    return count


def _in_order(graph: ir.Graph, members: list[ir.Node]) -> list[ir.Node]:
    """``members`` in graph order (the replacement goes where the last of them was)."""
    wanted = {id(m) for m in members}
    return [n for n in graph if id(n) in wanted]
