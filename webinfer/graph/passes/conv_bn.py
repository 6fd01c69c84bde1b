"""Fold BatchNormalization (inference mode, constant parameters) into the Conv before it (a rule).

    BN(Conv(x, W, b)) = Conv(x, W * s, (b - mean) * s + beta),   s = gamma / sqrt(var + eps)

with ``s`` broadcast over W's output-channel axis (axis 0, also for grouped convolutions). The
arithmetic is done in float64 and stored back in W's dtype. New initializers are created, so a weight
shared with another node is left untouched. Not folded: Conv weights that are not constant, a Conv
output read by anything but the BN, a BN in training mode or whose extra outputs are used.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ._util import const, new_initializer, remove_if_dead, replace_value, sole_consumer
from .rules import Match, Rule, pass_of


def _pattern(bn: ir.Node) -> Match | None:
    """Conv -> BatchNormalization, the Conv's result read by the BN alone."""
    conv = bn.inputs[0].producer() if bn.inputs and bn.inputs[0] is not None else None
    if conv is None or conv.op_type != "Conv" or conv.domain != "" or conv.graph is not bn.graph:
        return None
    if sole_consumer(conv.outputs[0]) is not bn:
        return None
    return Match([conv, bn], {"conv": conv, "bn": bn})


def _bn_params(bn: ir.Node, channels: int) -> tuple[np.ndarray, ...] | None:
    if len(bn.inputs) < 5 or any(v is None for v in bn.inputs[1:5]):
        return None
    if bn.attributes.get("training_mode") is not None and bn.attributes["training_mode"].as_int() != 0:
        return None
    if any(o.uses() or o.is_graph_output() for o in bn.outputs[1:]):
        return None
    params = [const(v) for v in bn.inputs[1:5]]
    if any(p is None or p.size != channels for p in params):
        return None
    return tuple(p.reshape(-1).astype(np.float64) for p in params)


def _condition(m: Match) -> bool:
    """A constant float weight (and bias, if any); the BN in inference mode, its statistics constants of one
    value per output channel, its running-statistics outputs unused. Binds the weights for the replacement."""
    conv = m["conv"]
    w = const(conv.inputs[1]) if len(conv.inputs) > 1 else None
    has_bias = len(conv.inputs) > 2 and conv.inputs[2] is not None
    b = const(conv.inputs[2]) if has_bias else None
    if w is None or w.dtype.kind != "f" or w.ndim < 3 or (has_bias and b is None):
        return False
    params = _bn_params(m["bn"], w.shape[0])
    m.values.update(w=w, b=b, has_bias=has_bias, params=params)
    return params is not None


def _replacement(model: ir.Model, m: Match) -> None:
    graph, conv, bn, w, b = model.graph, m["conv"], m["bn"], m["w"], m["b"]
    gamma, beta, mean, var = m["params"]
    eps = bn.attributes["epsilon"].as_float() if "epsilon" in bn.attributes else 1e-5
    scale = gamma / np.sqrt(var + eps)
    bias = b.reshape(-1).astype(np.float64) if b is not None else np.zeros(w.shape[0])
    new_w = (w.astype(np.float64) * scale.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)
    new_b = ((bias - mean) * scale + beta).astype(w.dtype)
    hint = conv.name or "conv"
    old_inputs = [v for v in conv.inputs[1:3] if v is not None]
    conv.replace_input_with(1, new_initializer(graph, new_w, f"{hint}_bn_weight"))
    if not m["has_bias"]:
        conv.resize_inputs(3)
    conv.replace_input_with(2, new_initializer(graph, new_b, f"{hint}_bn_bias"))
    replace_value(graph, bn.outputs[0], conv.outputs[0])  # conv's output is fresh: always possible
    graph.remove(bn, safe=True)
    for v in old_inputs:
        remove_if_dead(graph, v.producer())


CONV_BN = Rule("conv_bn", ("BatchNormalization",), _pattern, _condition, _replacement, domains=("",))
RULES = (CONV_BN,)
run = pass_of(*RULES)
