"""GELU and SiLU recognised from their primitive spellings -> ``webinfer.Gelu`` / ``webinfer.Swish``.

- GELU, erf form (BERT, torch.onnx): ``0.5 * x * (1 + Erf(x / sqrt(2)))``, written by exporters as
  Div(x, 1.4142) or Mul(x, 0.7071) -> Erf -> Add(1) -> Mul(x) -> Mul(0.5), or with the 0.5 applied to x
  first. One op evaluates erf once instead of five kernels' worth of loads and stores.
- GELU, tanh form (GPT-2, ViT exports, ``approximate='tanh'``): ``0.5 * x * (1 + Tanh(sqrt(2/pi) * (x +
  0.044715 * x^3)))``, x^3 as Pow(x, 3) or products, the half applied either way as above.
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
    tail = _half_x_one_plus(erf.outputs[0], x)
    return ([scale, erf, *tail], x) if tail is not None else None


def _half_x_one_plus(value: ir.Value, x: ir.Value) -> list[ir.Node] | None:
    """The nodes of ``0.5 * x * (1 + value)`` (either association), or None."""
    add = _only_user(value)
    if not _is(add, "Add") or not _near(scalar(_other(add, value)), 1.0):
        return None
    mul = _only_user(add.outputs[0])
    other = _other(mul, add.outputs[0]) if _is(mul, "Mul") else None
    if other is None:
        return None
    if other is x:  # (x * (1 + t)) * 0.5
        half = _only_user(mul.outputs[0])
        if not _is(half, "Mul") or not _near(scalar(_other(half, mul.outputs[0])), 0.5):
            return None
        return [add, mul, half]
    pre = other.producer()  # (0.5 * x) * (1 + t)
    if not _is(pre, "Mul") or _only_user(other) is not mul or _other(pre, x) is None:
        return None
    if not _near(scalar(_other(pre, x)), 0.5):
        return None
    return [add, pre, mul]


def _scaled(value: ir.Value | None, c: float) -> tuple[ir.Node, ir.Value] | None:
    """``value`` = Mul(y, c) in either order: (the Mul, y)."""
    node = value.producer() if value is not None else None
    if not _is(node, "Mul"):
        return None
    for i in (0, 1):
        if _near(scalar(node.inputs[1 - i]), c):
            return node, node.inputs[i]
    return None


def match_gelu_tanh(tanh: ir.Node) -> tuple[list[ir.Node], ir.Value] | None:
    """GELU's tanh form: ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`` (x^3 as Pow or Muls)."""
    outer = _scaled(tanh.inputs[0], math.sqrt(2 / math.pi))
    inner = outer[1].producer() if outer is not None and _only_user(tanh.inputs[0]) is tanh else None
    if not _is(inner, "Add") or _only_user(inner.outputs[0]) is not outer[0]:
        return None
    for i in (0, 1):
        x, cubic = inner.inputs[i], _scaled(inner.inputs[1 - i], 0.044715)
        if cubic is None or x is None or _only_user(cubic[0].outputs[0]) is not inner:
            continue
        cube = _cube_nodes(cubic[1], x)
        tail = _half_x_one_plus(tanh.outputs[0], x) if cube is not None else None
        if tail is not None:
            return [*cube, cubic[0], inner, outer[0], tanh, *tail], x
    return None


def _cube_nodes(value: ir.Value, x: ir.Value) -> list[ir.Node] | None:
    """The nodes computing ``x^3`` as Pow(x, 3), x * (x * x) or (x * x) * x, used only on the way."""
    node = value.producer()
    if _only_user(value) is None:
        return None
    if _is(node, "Pow") and node.inputs[0] is x and _near(scalar(node.inputs[1]), 3.0):
        return [node]
    sq = _other(node, x) if _is(node, "Mul") else None
    sq_node = sq.producer() if sq is not None else None
    if _is(sq_node, "Mul") and sq_node.inputs[0] is x and sq_node.inputs[1] is x and _only_user(sq) is node:
        return [sq_node, node]
    return None


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
        elif _is(node, "Tanh") and (found := match_gelu_tanh(node)):
            members, x = found
            _replace(graph, _in_order(graph, members), "Gelu", x, approximate=(ir.AttributeType.STRING, "tanh"))
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
