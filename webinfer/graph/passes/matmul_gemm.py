"""MatMul + Add -> Gemm (a rule), when A is 2-D, B is a 2-D float constant and the bias is a constant that
Gemm's one-way broadcasting accepts (scalar, (N,), (1, N), (1, 1)). One kernel instead of two."""

from __future__ import annotations

import onnx_ir as ir

from ._util import const, rank, replace_value, sole_consumer
from .rules import Match, Rule, pass_of


def _pattern(add: ir.Node):
    """MatMul -> Add, the MatMul's result read by the Add alone: one match per side of the Add."""
    for i in (0, 1):
        mm = add.inputs[i].producer() if add.inputs[i] is not None else None
        if mm is None or mm.op_type != "MatMul" or mm.domain != "" or mm.graph is not add.graph:
            continue
        if sole_consumer(mm.outputs[0]) is not add or add.inputs[0] is add.inputs[1]:
            continue
        yield Match([mm, add], {"mm": mm, "add": add, "bias": add.inputs[1 - i]})


def _condition(m: Match) -> bool:
    a, b, c = m["mm"].inputs[0], const(m["mm"].inputs[1]), const(m["bias"])
    if b is None or b.ndim != 2 or b.dtype.kind != "f" or rank(a) != 2 or c is None or c.dtype != b.dtype:
        return False
    n = b.shape[1]
    return c.ndim <= 2 and c.shape in {(), (1,), (n,), (1, n), (1, 1)}


def _replacement(model: ir.Model, m: Match) -> bool:
    graph, mm, add = model.graph, m["mm"], m["add"]
    gemm = ir.Node("", "Gemm", [mm.inputs[0], mm.inputs[1], m["bias"]], name=add.name or mm.name or None,
                   num_outputs=1)
    graph.insert_before(add, gemm)
    out = gemm.outputs[0]
    out.dtype, out.shape = add.outputs[0].dtype, add.outputs[0].shape
    if not replace_value(graph, add.outputs[0], out):
        graph.remove(gemm, safe=True)
        return False
    graph.remove(add, safe=True)
    graph.remove(mm, safe=True)
    return True


MATMUL_ADD_GEMM = Rule("matmul_add_gemm", ("Add",), _pattern, _condition, _replacement, domains=("",))
RULES = (MATMUL_ADD_GEMM,)
run = pass_of(*RULES)
