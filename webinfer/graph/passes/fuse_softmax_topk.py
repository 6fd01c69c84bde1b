"""Softmax followed by TopK over the last axis -> ``webinfer.SoftmaxTopK``: one kernel per row computes the
probabilities and selects the k best of them (a classifier's probabilities -> top 5), instead of a softmax
kernel and a TopK kernel. Output 0 is still the Softmax's result, so its other users (a graph output) keep
it; the selection ranks the probabilities as computed, so ties and NaNs rank as ONNX's TopK ranks them.
"""

from __future__ import annotations

import onnx_ir as ir

from ...opschema import WEBINFER_DOMAIN
from ._program import use_webinfer_domain
from ._util import install, int_attr, rank


def _last_axis(node: ir.Node, r: int, default: int) -> bool:
    axis = int_attr(node, "axis", default)
    return axis in (-1, r - 1)


def _fuse(graph: ir.Graph, topk: ir.Node, opset: int) -> bool:
    x = topk.inputs[0]
    softmax = x.producer() if x is not None else None
    if softmax is None or softmax.op_type != "Softmax" or softmax.domain not in ("", "ai.onnx") or softmax.graph is not graph:
        return False
    src, r = softmax.inputs[0], rank(x)
    if len(topk.inputs) != 2 or r is None or r == 0 or src.dtype != ir.DataType.FLOAT:
        return False
    # (before opset 13 Softmax flattens at its axis, default 1: the same rows when that axis is the last)
    if not (_last_axis(softmax, r, -1 if opset >= 13 else 1) and _last_axis(topk, r, -1)):
        return False
    k = topk.inputs[1]
    others = [u.node for u in x.uses() if u.node is not topk]
    if k.producer() is None:
        at = softmax  # (k is an initializer or input: the probabilities' other users may come before the TopK)
    elif not others:
        at = topk
    else:
        return False
    attrs = [ir.AttrInt64("largest", int_attr(topk, "largest", 1))]
    fused = ir.Node(WEBINFER_DOMAIN, "SoftmaxTopK", [src, k], attributes=attrs, name=topk.name or softmax.name,
                    num_outputs=3)
    install(graph, fused, at, [x, *topk.outputs], [topk, softmax])
    return True


def run(model: ir.Model) -> int:
    opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx", 13))
    if opset < 10:  # (TopK's k became an input in opset 10)
        return 0
    count = 0
    for node in list(model.graph):
        if node.op_type == "TopK" and node.domain in ("", "ai.onnx") and node.graph is model.graph:
            if _fuse(model.graph, node, opset):
                use_webinfer_domain(model)
                count += 1
    return count
