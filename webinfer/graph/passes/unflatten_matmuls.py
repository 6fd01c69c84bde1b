"""A projection written flatten -> 2-D matmul -> unflatten becomes one MatMul over the leading dims (a rule):

    Reshape(x [*lead, k] -> [m, k]) -> Gemm/MatMul(W [k, n], bias?) -> Reshape([*lead, n])
    ==>  MatMul(x, W) [+ bias]

(x may also end in dims whose product is k, such as the attention's [b, s, heads, d]: it is then viewed as
[*lead, k] first.)
torch's dynamo exporter writes every ``nn.Linear``/``Conv1D`` on a 3-D input this way (view, addmm, view).
The flat [m, n] result sits between the matmul and whatever follows, so the bias, an activation or a residual
Add could not join the matmul's epilogue (fuse_epilogue) and each ran as a kernel of its own (GPT-2: four a
layer). MatMul broadcasts over the leading dims, so the result is the same. Only when the two Reshapes provably
keep the same leading dims (shapes known, named dims equal by name) and W is a constant.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ._util import (
    const,
    int_attr,
    new_initializer,
    onnx_op,
    rank,
    replace_value,
    same_known_shape,
    sole_consumer,
)
from .rules import Match, Rule, pass_of


def _flat_input(node: ir.Node) -> ir.Value | None:
    """x when ``node``'s first input is Reshape(x) to [m, k] of rank 2, read only here."""
    flat = onnx_op(node.inputs[0], "Reshape")
    if flat is None or sole_consumer(node.inputs[0]) is not node or rank(node.inputs[0]) != 2:
        return None
    return flat.inputs[0] if isinstance(node.inputs[0].shape[-1], int) else None


def _leads(x: ir.Value, lead: list, k: int) -> bool:
    """x is [*lead, *tail] with prod(tail) = k."""
    if x.shape is None or len(x.shape) <= len(lead):
        return False
    tail = x.shape.dims[len(lead):]
    return same_known_shape(ir.Shape(x.shape.dims[:len(lead)]), ir.Shape(lead)) and \
        all(isinstance(d, int) for d in tail) and int(np.prod(tail)) == k


def _leading_view(graph: ir.Graph, x: ir.Value, lead: list, k: int, before: ir.Node) -> ir.Value:
    """x [*lead, *tail] (``_leads``) as [*lead, k]: x itself, or a Reshape of it (a view; heads merged back to
    the hidden size, [b, s, h, d] -> [b, s, h * d])."""
    if len(x.shape) == len(lead) + 1:
        return x
    target = new_initializer(graph, np.array([0] * len(lead) + [k], np.int64), "leading_view")
    view = ir.Node("", "Reshape", [x, target], num_outputs=1)
    graph.insert_before(before, view)
    view.outputs[0].dtype, view.outputs[0].shape = x.dtype, ir.Shape([*lead, k])
    return view.outputs[0]


def _weight(node: ir.Node) -> tuple[np.ndarray, ir.Value | None] | None:
    """(W [k, n], bias value or None) of a MatMul or a plain Gemm (alpha = beta = 1, A not transposed)."""
    w = const(node.inputs[1])
    if w is None or w.ndim != 2 or w.dtype.kind != "f":
        return None
    if node.op_type == "MatMul":
        return w, None
    if int_attr(node, "transA", 0):
        return None
    for name in ("alpha", "beta"):
        a = node.attributes.get(name)
        if a is not None and a.as_float() != 1.0:
            return None
    if int_attr(node, "transB", 0):
        w = np.ascontiguousarray(w.T)
    bias = node.inputs[2] if len(node.inputs) > 2 else None
    if bias is not None:
        c = const(bias)
        if c is None or c.shape not in {(w.shape[1],), (1, w.shape[1])}:
            return None
    return w, bias


def _pattern(node: ir.Node) -> Match | None:
    """Reshape(x) to 2-D -> MatMul/Gemm -> Reshape, each intermediate read by the next node alone."""
    x = _flat_input(node)
    back = sole_consumer(node.outputs[0]) if x is not None else None
    if back is None or back.op_type != "Reshape" or back.domain not in ("", "ai.onnx"):
        return None
    return Match([node.inputs[0].producer(), node, back], {"x": x, "node": node, "back": back})


def _condition(m: Match) -> bool:
    """A constant float W (a plain Gemm: alpha = beta = 1, A not transposed, a bias of W's columns), a result
    of rank >= 3 and n columns whose leading dims are x's."""
    found = _weight(m["node"])
    out = m["back"].outputs[0]
    if found is None or out.shape is None or len(out.shape) < 3 or out.shape[-1] != found[0].shape[1]:
        return False
    m.values["w"], m.values["bias"] = found
    return _leads(m["x"], list(out.shape.dims[:-1]), found[0].shape[0])


def _replacement(model: ir.Model, m: Match) -> None:
    graph, node, back, w, bias = model.graph, m["node"], m["back"], m["w"], m["bias"]
    out = back.outputs[0]
    x = _leading_view(graph, m["x"], list(out.shape.dims[:-1]), w.shape[0], back)
    weight = node.inputs[1] if node.op_type == "MatMul" or not int_attr(node, "transB", 0) else \
        new_initializer(graph, w, f"{node.inputs[1].name}_t")
    mm = ir.Node("", "MatMul", [x, weight], name=node.name or None, num_outputs=1)
    graph.insert_before(back, mm)
    result = mm.outputs[0]
    result.dtype, result.shape = out.dtype, out.shape
    if bias is not None:
        add = ir.Node("", "Add", [result, bias], name=f"{node.name}_bias" if node.name else None, num_outputs=1)
        graph.insert_before(back, add)
        result = add.outputs[0]
        result.dtype, result.shape = out.dtype, out.shape
    replace_value(graph, out, result)  # a fresh value: it can take a graph output's place
    flat = node.inputs[0].producer()
    for dead in (back, node, flat):
        graph.remove(dead, safe=True)


UNFLATTEN_MATMUL = Rule("unflatten_matmul", ("MatMul", "Gemm"), _pattern, _condition, _replacement)
RULES = (UNFLATTEN_MATMUL,)
run = pass_of(*RULES)
