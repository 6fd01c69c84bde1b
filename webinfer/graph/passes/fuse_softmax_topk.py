"""Softmax followed by TopK over the last axis -> ``webinfer.SoftmaxTopK`` (a rule): one kernel per row computes
the probabilities and selects the k best of them (a classifier's probabilities -> top 5), instead of a softmax
kernel and a TopK kernel. Output 0 is still the Softmax's result, so its other users (a graph output) keep
it; the selection ranks the probabilities as computed, so ties and NaNs rank as ONNX's TopK ranks them.
"""

from __future__ import annotations

import onnx_ir as ir

from ...opschema import WEBINFER_DOMAIN
from ._program import use_webinfer_domain
from ._util import install, int_attr, rank
from .match import is_op
from .rules import Match, Rule, pass_of


def _last_axis(node: ir.Node, r: int, default: int) -> bool:
    return int_attr(node, "axis", default) in (-1, r - 1)


def _pattern(topk: ir.Node) -> Match | None:
    x = topk.inputs[0]
    softmax = x.producer() if x is not None else None
    if not is_op(softmax, "Softmax") or softmax.graph is not topk.graph:
        return None
    opset = topk.graph.opset_imports.get("", topk.graph.opset_imports.get("ai.onnx", 13))
    return Match([softmax, topk], {"softmax": softmax, "topk": topk, "x": x, "opset": opset})


def _condition(m: Match) -> bool:
    """k an input (opset >= 10), float32 rows, both ops over the last axis; when k is computed in the graph,
    the probabilities have no other reader (the fused node then goes where the TopK was)."""
    softmax, topk, x, opset = m["softmax"], m["topk"], m["x"], m["opset"]
    src, r = softmax.inputs[0], rank(x)
    if opset < 10 or len(topk.inputs) != 2 or r is None or r == 0 or src.dtype != ir.DataType.FLOAT:
        return False
    # (before opset 13 Softmax flattens at its axis, default 1: the same rows when that axis is the last)
    if not (_last_axis(softmax, r, -1 if opset >= 13 else 1) and _last_axis(topk, r, -1)):
        return False
    return topk.inputs[1].producer() is None or all(u.node is topk for u in x.uses())


def _replacement(model: ir.Model, m: Match) -> None:
    softmax, topk, x = m["softmax"], m["topk"], m["x"]
    k = topk.inputs[1]
    at = softmax if k.producer() is None else topk  # (k an initializer or input: other readers may come first)
    fused = ir.Node(WEBINFER_DOMAIN, "SoftmaxTopK", [softmax.inputs[0], k], name=topk.name or softmax.name,
                    attributes=[ir.AttrInt64("largest", int_attr(topk, "largest", 1))], num_outputs=3)
    install(model.graph, fused, at, [x, *topk.outputs], [topk, softmax])
    use_webinfer_domain(model)


SOFTMAX_TOPK = Rule("softmax_topk", ("TopK",), _pattern, _condition, _replacement)
RULES = (SOFTMAX_TOPK,)
run = pass_of(*RULES)
