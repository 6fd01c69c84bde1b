"""GELU and SiLU recognised from their primitive spellings -> ``webinfer.Gelu`` / ``webinfer.Swish`` (rules).

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
from ._util import replace_value, sole_consumer
from .match import in_order, is_op, near, other, scaled
from .rules import Match, Rule, always, pass_of


def _half_x_one_plus(value: ir.Value, x: ir.Value) -> tuple[list[ir.Node], ir.Value, ir.Value] | None:
    """``half * x * (one + value)`` (either association): its nodes and the ``one`` and ``half`` operands."""
    add = sole_consumer(value)
    one = other(add, value) if is_op(add, "Add") else None
    mul = sole_consumer(add.outputs[0]) if one is not None else None
    o = other(mul, add.outputs[0]) if is_op(mul, "Mul") else None
    if o is None:
        return None
    if o is x:  # (x * (1 + t)) * 0.5
        half = sole_consumer(mul.outputs[0])
        h = other(half, mul.outputs[0]) if is_op(half, "Mul") else None
        return ([add, mul, half], one, h) if h is not None else None
    pre = o.producer()  # (0.5 * x) * (1 + t)
    if not is_op(pre, "Mul") or sole_consumer(o) is not mul or other(pre, x) is None:
        return None
    return [add, pre, mul], one, other(pre, x)


def _tail_constants(m: Match) -> bool:
    return near(scalar(m["one"]), 1.0) and near(scalar(m["half"]), 0.5)


def _gelu_erf(erf: ir.Node) -> Match | None:
    scale = erf.inputs[0].producer() if erf.inputs[0] is not None else None
    if not (is_op(scale, "Div") or is_op(scale, "Mul")) or sole_consumer(erf.inputs[0]) is not erf:
        return None
    x, c = scale.inputs[0], scalar(scale.inputs[1])
    if is_op(scale, "Mul") and c is None:
        x, c = scale.inputs[1], scalar(scale.inputs[0])
    tail = _half_x_one_plus(erf.outputs[0], x) if x is not None else None
    if tail is None:
        return None
    nodes, one, half = tail
    return Match([scale, erf, *nodes], {"x": x, "c": c, "divide": is_op(scale, "Div"), "one": one, "half": half})


def _gelu_erf_ok(m: Match) -> bool:
    """x / sqrt(2) or x * (1 / sqrt(2)) inside, 1 and 0.5 outside."""
    return near(m["c"], math.sqrt(2) if m["divide"] else 1 / math.sqrt(2)) and _tail_constants(m)


def _cube_nodes(value: ir.Value, x: ir.Value) -> list[ir.Node] | None:
    """The nodes computing ``x^3`` as Pow(x, 3), x * (x * x) or (x * x) * x, used only on the way."""
    node = value.producer()
    if sole_consumer(value) is None:
        return None
    if is_op(node, "Pow") and node.inputs[0] is x and near(scalar(node.inputs[1]), 3.0):
        return [node]
    sq = other(node, x) if is_op(node, "Mul") else None
    sq_node = sq.producer() if sq is not None else None
    if is_op(sq_node, "Mul") and sq_node.inputs[0] is x and sq_node.inputs[1] is x and sole_consumer(sq) is node:
        return [sq_node, node]
    return None


def _gelu_tanh(tanh: ir.Node):
    """``tanh(sqrt(2/pi) * (x + 0.044715 * x^3))``: one match per order of the inner Add's inputs (the
    constants inside say which Mul is which; the 1 and 0.5 outside are the condition's)."""
    outer = scaled(tanh.inputs[0], math.sqrt(2 / math.pi))
    inner = outer[1].producer() if outer is not None and sole_consumer(tanh.inputs[0]) is tanh else None
    if not is_op(inner, "Add") or sole_consumer(inner.outputs[0]) is not outer[0]:
        return
    for i in (0, 1):
        x, cubic = inner.inputs[i], scaled(inner.inputs[1 - i], 0.044715)
        if cubic is None or x is None or sole_consumer(cubic[0].outputs[0]) is not inner:
            continue
        cube = _cube_nodes(cubic[1], x)
        tail = _half_x_one_plus(tanh.outputs[0], x) if cube is not None else None
        if tail is not None:
            nodes, one, half = tail
            yield Match([*cube, cubic[0], inner, outer[0], tanh, *nodes], {"x": x, "one": one, "half": half})


def _silu(sig: ir.Node) -> Match | None:
    x = sig.inputs[0]
    mul = sole_consumer(sig.outputs[0])
    if x is None or not is_op(mul, "Mul") or other(mul, sig.outputs[0]) is not x:
        return None
    return Match([sig, mul], {"x": x})


def _replacement(op: str, **attrs):
    """Replace the matched nodes (in graph order) by ``op(x)`` where the last of them was."""
    def replace(model: ir.Model, m: Match) -> None:
        graph = model.graph
        members = in_order(graph, m.nodes)
        last = members[-1]
        node = ir.Node(WEBINFER_DOMAIN, op, [m["x"]], attributes=[ir.Attr(k, t, v) for k, (t, v) in attrs.items()],
                       name=last.name, num_outputs=1)
        graph.insert_before(last, node)
        new, old = node.outputs[0], last.outputs[0]
        new.dtype, new.shape = old.dtype, old.shape
        replace_value(graph, old, new)
        for n in reversed(members):
            graph.remove(n, safe=True)
        use_webinfer_domain(model)
    return replace


GELU_ERF = Rule("gelu_erf", ("Erf",), _gelu_erf, _gelu_erf_ok,
                _replacement("Gelu", approximate=(ir.AttributeType.STRING, "none")))
GELU_TANH = Rule("gelu_tanh", ("Tanh",), _gelu_tanh, _tail_constants,
                 _replacement("Gelu", approximate=(ir.AttributeType.STRING, "tanh")))
SILU = Rule("silu", ("Sigmoid",), _silu, always, _replacement("Swish", alpha=(ir.AttributeType.FLOAT, 1.0)))
RULES = (GELU_ERF, GELU_TANH, SILU)
run = pass_of(*RULES)
