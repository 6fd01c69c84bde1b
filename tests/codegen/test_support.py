"""`build` names every unsupported op of a model at once; `webinfer inspect model.onnx` lists each op with
whether webinfer lowers it. Ops of other domains are looked up like ONNX ones (``domain:Op``)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from webinfer.build import build
from webinfer.codegen import registry
from webinfer.errors import UnsupportedOpError
from webinfer.runtime.inference import InferenceSession


def _cli(*args):
    r = subprocess.run([sys.executable, "-m", "webinfer.cli", *args], capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout, r.stderr


def _three_unknown_ops(path) -> str:
    """Relu -> two com.example.Foo -> org.example.Bar -> Sigmoid: two custom ops (three nodes) nobody lowers."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Foo", ["a"], ["b"], name="foo1", domain="com.example"),
             helper.make_node("Foo", ["b"], ["c"], name="foo2", domain="com.example"),
             helper.make_node("Bar", ["c"], ["d"], name="bar", domain="org.example"),
             helper.make_node("Sigmoid", ["d"], ["y"], name="sig")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1),
                                                helper.make_opsetid("org.example", 1)])
    onnx.save(model, path)
    return str(path)


def test_build_lists_all_unsupported_ops_in_one_line(tmp_path):
    src = _three_unknown_ops(tmp_path / "m.onnx")
    rc, _, err = _cli("build", src, "-o", str(tmp_path / "o.wi"))
    assert rc != 0 and "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("webinfer:")]
    assert len(lines) == 1, err
    assert "2 unsupported ops" in lines[0]
    assert "com.example.Foo (2 nodes, first 'foo1')" in lines[0]
    assert "org.example.Bar (node 'bar')" in lines[0]


def test_inspect_onnx_lists_every_op_with_support(tmp_path):
    src = _three_unknown_ops(tmp_path / "m.onnx")
    rc, out, err = _cli("inspect", src)
    assert rc == 0, err
    rows = {ln.split()[0]: ln.split()[1:] for ln in out.splitlines() if ln and ln.split()[0] in
            ("Relu", "Sigmoid", "com.example.Foo", "org.example.Bar")}
    assert rows == {"Relu": ["1", "yes"], "Sigmoid": ["1", "yes"], "com.example.Foo": ["2", "NO"],
                    "org.example.Bar": ["1", "NO"]}
    assert "unsupported: 2 ops (3 nodes): com.example.Foo, org.example.Bar" in out


def test_unlowered_op_on_constants_is_folded_not_refused(tmp_path, monkeypatch):
    """An op without a lowering folds when its inputs are constants; on data it is refused before any work."""
    registry.load_all()
    monkeypatch.delitem(registry.LOWERINGS, "Sin")
    w = numpy_helper.from_array(np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3), "w")
    nodes = [helper.make_node("Sin", ["w"], ["s"]), helper.make_node("Add", ["x", "s"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [w])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    build(model, str(tmp_path / "a"), optimize=False)  # the Sin reaches the lowering, which folds it
    x = np.ones((2, 3), np.float32)
    got = InferenceSession(str(tmp_path / "a")).run(None, {"x": x})[0]
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-6)

    nodes = [helper.make_node("Sin", ["x"], ["s"], name="live"), helper.make_node("Add", ["s", "w"], ["y"])]
    g = helper.make_graph(nodes, "g", g.input, g.output, [w])
    with pytest.raises(UnsupportedOpError, match="unsupported op Sin \\(node 'live'\\)"):
        # (unoptimized: the elementwise fusion would otherwise absorb the Sin into a fused kernel)
        build(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "b"), optimize=False)


def test_ops_inside_subgraphs_are_checked(tmp_path):
    then = helper.make_graph([helper.make_node("Baz", ["x"], ["t"], domain="com.example", name="inner")], "then",
                             [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])])
    node = helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="branch")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    with pytest.raises(UnsupportedOpError, match="com.example.Baz"):
        build(model, str(tmp_path / "o"))
