"""MatMul + Add -> Gemm, when A is 2-D, B is a 2-D float constant and the bias is a constant that
Gemm's one-way broadcasting accepts (scalar, (N,), (1, N), (1, 1)). One kernel instead of two."""

from __future__ import annotations

import onnx_ir as ir

from ._util import const, rank, replace_value, sole_consumer


def fuse(graph: ir.Graph, add: ir.Node) -> bool:
    for i in (0, 1):
        mm = add.inputs[i].producer() if add.inputs[i] is not None else None
        if mm is None or mm.op_type != "MatMul" or mm.domain != "" or mm.graph is not graph:
            continue
        if sole_consumer(mm.outputs[0]) is not add or add.inputs[0] is add.inputs[1]:
            continue
        a, c_value = mm.inputs[0], add.inputs[1 - i]
        b, c = const(mm.inputs[1]), const(c_value)
        if b is None or b.ndim != 2 or b.dtype.kind != "f" or rank(a) != 2 or c is None or c.dtype != b.dtype:
            continue
        n = b.shape[1]
        if c.ndim > 2 or c.shape not in {(), (1,), (n,), (1, n), (1, 1)}:
            continue
        gemm = ir.Node("", "Gemm", [a, mm.inputs[1], c_value], name=add.name or mm.name or None,
                       num_outputs=1)
        graph.insert_before(add, gemm)
        out = gemm.outputs[0]
        out.dtype, out.shape = add.outputs[0].dtype, add.outputs[0].shape
        if not replace_value(graph, add.outputs[0], out):
            graph.remove(gemm, safe=True)
            continue
        graph.remove(add, safe=True)
        graph.remove(mm, safe=True)
        return True
    return False


def run(model: ir.Model) -> int:
    graph = model.graph
    return sum(fuse(graph, node) for node in list(graph)
               if node.op_type == "Add" and node.domain == "" and node.graph is graph)
