"""Two packed matmuls of the same input, one read only by the other's epilogue -> ``webinfer.PairedMatMulQ`` (a rule).

A gated MLP (LLaMA's SwiGLU, Gemma's GeGLU, T5's gated-gelu) computes ``act(x @ Wg) * (x @ Wu)``: after
fuse_epilogue one projection is a ``FusedMatMulQ`` whose program reads the other's result. As two kernels a
decode step pays two dispatches (tens of microseconds each on a software GPU), loads and normalizes x twice
and writes and reads back the gate. The paired op keeps both weights: its decode GEMV (the software and GPU
classes') computes the two columns of an output side by side from the same x loads and runs the program on
both results (codegen/kernels/quant_matmul.py, ``paired``); GEMMs run the two matmuls as before.

Inputs: x, words, params, bias, norm scale (MatMulQ's five), then the partner's words, params and bias, then
the program's extras. Program input 0 is ``x @ W + bias``, input 1 the partner's ``x @ W2 + bias2``, input
``i >= 2`` the node's input ``8 + i - 2``. Matched: both of webinfer's quantize formats or f32 (same
``format``, ``k``, ``n``, no absorbed norm yet: absorb_norms runs after and takes the pair's x as one
reader), the partner a plain ``MatMulQ`` whose result has no other reader and is no graph output.
"""

from __future__ import annotations

import onnx_ir as ir

from ...opschema import WEBINFER_DOMAIN
from ._program import Program
from ._util import install
from .rules import Match, Rule, pass_of

BASE = 5  # x, words, block parameters, bias, norm scale (opschema: MatMulQ's base inputs)
SAME_ATTRS = ("format", "k", "n", "block")


def _attrs(node: ir.Node) -> dict:
    return {name: node.attributes[name].value for name in SAME_ATTRS if name in node.attributes}


def _padded(node: ir.Node) -> list:
    return list(node.inputs[:BASE]) + [None] * (BASE - min(len(node.inputs), BASE))


def _pattern(node: ir.Node):
    """A program input of ``node`` produced by a plain MatMulQ of the same x, read by nothing else: one match
    per such input, in input order."""
    for at, extra in enumerate(node.inputs[BASE:]):
        base = extra.producer() if extra is not None else None
        if base is None or base.domain != WEBINFER_DOMAIN or base.op_type != "MatMulQ" or base.graph is not node.graph:
            continue
        if extra.is_graph_output() or len(extra.uses()) != 1 or base.inputs[0] is not node.inputs[0]:
            continue
        yield Match([base, node], {"node": node, "partner": base, "at": at})


def _condition(m: Match) -> bool:
    """The same format, k, n and block; no absorbed norm on either; not a model's float16 weights (the paired
    GEMV has no such variant)."""
    node, base = m["node"], m["partner"]
    mine, theirs = _padded(node), _padded(base)
    if mine[4] is not None or theirs[4] is not None or "norm_epsilon" in base.attributes:
        return False
    if _attrs(base) != _attrs(node) or "norm_epsilon" in node.attributes:
        return False
    return _attrs(node).get("format") != "f16"


def _replacement(model: ir.Model, m: Match) -> None:
    node, partner, at = m["node"], m["partner"], m["at"]
    extras = list(node.inputs[BASE:])
    others = extras[:at] + extras[at + 1:]
    program = Program.from_node(node, 1 + len(extras))
    mapping = [0] + [1 if i == at else 2 + i - (i > at) for i in range(len(extras))]
    program = program.remap(mapping, 2 + len(others))
    words2, params2, bias2 = _padded(partner)[1:4]
    attrs = [ir.Attr(name, a.type, a.value) for name, a in node.attributes.items()
             if name in SAME_ATTRS] + program.to_attributes()
    paired = ir.Node(WEBINFER_DOMAIN, "PairedMatMulQ", _padded(node) + [words2, params2, bias2] + others,
                     attributes=attrs, name=node.name, num_outputs=1)
    install(model.graph, paired, node, list(node.outputs), [node, partner])


PAIR_MATMULS = Rule("pair_matmuls", ("FusedMatMulQ",), _pattern, _condition, _replacement,
                    domains=(WEBINFER_DOMAIN,))
RULES = (PAIR_MATMULS,)
run = pass_of(*RULES)
