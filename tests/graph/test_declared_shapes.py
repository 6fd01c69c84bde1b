"""What a model declares but does not need: value_info / output shapes that disagree with inference (wrong
dims, wrong rank, static where the input is symbolic, inside an If branch too) and opset imports of domains no
node uses (custom, contrib, ai.onnx.ml, at an opset old enough for the upgrader). Neither may break the build;
the outputs equal onnx.reference's."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from webinfer.backend import WebinferRep

F = onnx.TensorProto.FLOAT
RNG = np.random.default_rng(3)
RELU_T = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Transpose", ["r"], ["y"], perm=[1, 0])]


def model(out_shape, vi=(), nodes=RELU_T, in_shape=("N", 3), opset=17, domains=()):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, list(in_shape))],
                          [helper.make_tensor_value_info("y", F, out_shape)],
                          value_info=[helper.make_tensor_value_info(n, F, s) for n, s in vi])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset),
                                               *[helper.make_opsetid(d, v) for d, v in domains]])


def branching(declared):
    """y = If(c) then Relu(x) else Neg(x), each branch declaring ``declared`` for its output."""
    def branch(op):
        return helper.make_graph([helper.make_node(op, ["x"], ["b"])], op, [],
                                 [helper.make_tensor_value_info("b", F, declared)])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=branch("Relu"), else_branch=branch("Neg"))]
    m = model(declared, nodes=nodes)
    m.graph.initializer.append(onnx.numpy_helper.from_array(np.float32(0), "zero"))
    return m


def folded(declared_k, declared_s):
    """A constant subexpression (folded at build time) and a shape computation, both declared wrongly."""
    nodes = [helper.make_node("Constant", [], ["k0"], value=onnx.numpy_helper.from_array(np.arange(3, dtype=np.float32))),
             helper.make_node("Mul", ["k0", "k0"], ["k"]),
             helper.make_node("Add", ["x", "k"], ["a"]),
             helper.make_node("Shape", ["a"], ["s"]),
             helper.make_node("Reshape", ["a", "s"], ["y"])]
    m = model(["N", 3], nodes=nodes)
    m.graph.value_info.extend([helper.make_tensor_value_info("k", F, declared_k),
                               helper.make_tensor_value_info("s", onnx.TensorProto.INT64, declared_s)])
    return m


CASES = {
    "folded constant and shape values declared wrongly": folded([4, 4], [5]),
    "static output of the wrong shape": model([2, 7]),
    "output of the wrong rank": model([6]),
    "value_info of the wrong shape": model(["M", "N"], vi=[("r", [1, 3])]),
    "value_info of the wrong rank": model(["M", "N"], vi=[("r", [9, 9, 9])]),
    "symbolic output named unlike the input": model(["a", "b"]),
    "If branches declaring a wrong shape": branching([5, 5, 5]),
    "unused contrib, ml and custom domains": model([3, "N"], domains=[("com.microsoft", 1), ("ai.onnx.ml", 3),
                                                                       ("org.example.unused", 7)]),
    "unused domains at opset 11 (upgraded)": model([3, "N"], opset=11, domains=[("com.microsoft", 1),
                                                                                 ("ai.onnx.ml", 2), ("x.y", 1)]),
    "unused domain of a version onnx does not know": model([3, "N"], domains=[("ai.onnx.ml", 99),
                                                                               ("com.microsoft", 99)]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_declarations_do_not_break_the_build(name):
    m = CASES[name]
    rep = WebinferRep(m)
    for n in (2, 5):
        x = RNG.standard_normal((n, 3)).astype(np.float32) * (1 if n == 2 else -1)
        want = ReferenceEvaluator(m).run(None, {"x": x})[0]
        got = rep.run({"x": x})[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_cli_builds_a_file_with_wrong_declarations_and_unused_domains(tmp_path):
    from webinfer.cli import main

    m = model([7], vi=[("r", [1, 1])], domains=[("com.microsoft", 1), ("ai.onnx.ml", 99)])
    onnx.save(m, tmp_path / "m.onnx")
    assert main(["build", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "art")]) in (0, None)
