"""An RMSNorm whose only readers are packed matmuls (``webinfer.MatMulQ`` / ``FusedMatMulQ`` / ``PairedMatMulQ``)
joins them (a rule).

A decoder layer normalizes the residual stream twice, each time for projections alone (q/k/v, gate/up), and
every norm is one more dispatch of a decode step (on lavapipe 80-120 us each, 61 of SmolLM2-135M's 317). Since
``rms(x) @ W = (x * gamma) @ W * r`` with ``r = 1 / sqrt(mean(x^2) + eps)`` a scalar per row, the matmul can
take ``x``, the norm's scale as its input 4 and ``norm_epsilon``: its decode GEMV multiplies x by gamma as it
loads it and scales each output by r, summing x^2 from the same loads (codegen/kernels/quant_matmul.py). The
kernels that cannot (tiled GEMMs, int8-activation GEMVs) normalize x once in a kernel of their own, shared by
the matmuls that read it, so nothing is computed twice where the fusion does not pay.

Matched: ONNX's or webinfer's RMSNormalization over the last axis of a float32 tensor with a scale of that
axis' length, whose output is no graph output and is read only as input 0 of matmuls of the same K.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ...opschema import WEBINFER_DOMAIN
from ._util import install, int_attr, rank, static_dims
from .rules import Match, Rule, pass_of

MATMULS = ("MatMulQ", "FusedMatMulQ", "PairedMatMulQ")
NORM_INPUT = 4  # x, words, block parameters, bias, norm scale (opschema: MatMulQ's base inputs)


def _float_attr(node: ir.Node, name: str, default: float) -> float:
    a = node.attributes.get(name)
    return default if a is None else float(a.as_float())


def _pattern(norm: ir.Node) -> Match | None:
    """A norm with a scale whose every reader takes its result once as input 0 of a packed matmul that has
    no norm of its own yet."""
    if len(norm.inputs) < 2 or norm.inputs[1] is None:
        return None
    y, users = norm.outputs[0], []
    for use in y.uses():
        node = use.node
        if node.domain != WEBINFER_DOMAIN or node.op_type not in MATMULS or use.idx != 0:
            return None
        if sum(v is y for v in node.inputs) != 1:
            return None
        if len(node.inputs) > NORM_INPUT and node.inputs[NORM_INPUT] is not None:
            return None
        if node not in users:
            users.append(node)
    return Match([norm, *users], {"norm": norm, "users": users}) if users else None


def _condition(m: Match) -> bool:
    """float32 x and scale, over the last axis, of a static length K that each matmul reduces; the norm's
    result no graph output."""
    norm = m["norm"]
    x, scale = norm.inputs[0], norm.inputs[1]
    r = rank(x)
    if not r or x.dtype != ir.DataType.FLOAT or scale.dtype != ir.DataType.FLOAT:
        return False
    k = x.shape[-1]
    if int_attr(norm, "axis", -1) not in (-1, r - 1) or not isinstance(k, int):
        return False
    dims = static_dims(scale)
    if dims is None or int(np.prod(dims)) != k or (dims and dims[-1] != k):
        return False
    return not norm.outputs[0].is_graph_output() and all(int_attr(u, "k", -1) == k for u in m["users"])


def _replacement(model: ir.Model, m: Match) -> None:
    graph, norm = model.graph, m["norm"]
    x, scale = norm.inputs[0], norm.inputs[1]
    eps = _float_attr(norm, "epsilon", 1e-5)
    for user in m["users"]:
        weights = list(user.inputs[1:NORM_INPUT])  # words, block parameters, bias (the last two optional)
        weights += [None] * (NORM_INPUT - 1 - len(weights))
        inputs = [x, *weights, scale, *user.inputs[NORM_INPUT + 1:]]
        attrs = [ir.Attr(name, a.type, a.value) for name, a in user.attributes.items()]
        attrs.append(ir.AttrFloat32("norm_epsilon", eps))
        fused = ir.Node(WEBINFER_DOMAIN, user.op_type, inputs, attributes=attrs, name=user.name, num_outputs=1)
        install(graph, fused, user, list(user.outputs), [user])
    graph.remove(norm, safe=True)


ABSORB_NORM = Rule("absorb_norm", ("RMSNormalization",), _pattern, _condition, _replacement,
                   domains=("", "ai.onnx", WEBINFER_DOMAIN))
RULES = (ABSORB_NORM,)
run = pass_of(*RULES)
