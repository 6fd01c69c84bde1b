"""fuse_elementwise: chains and DAGs of float elementwise ops (and int/bool data) become one kernel; values
used outside the group, small integer (shape) math and lone ops are left alone. Outputs are checked against
ReferenceEvaluator on the original graph."""

from __future__ import annotations

import numpy as np
import onnx.helper as h
from fusion_util import after_pass, model, randn, run_checked


def test_chain_with_broadcast_constants_and_where_is_one_kernel():
    nodes = [h.make_node("Mul", ["x", "two"], ["a"]), h.make_node("Add", ["a", "y"], ["b"]),
             h.make_node("Relu", ["b"], ["c"]), h.make_node("Sigmoid", ["c"], ["d"]),
             h.make_node("Where", ["m", "d", "w"], ["e"]), h.make_node("Clip", ["e", "lo", ""], ["out"])]
    feeds = {"x": randn(2, 3, 4), "y": randn(3, 1), "m": np.random.default_rng(1).random((4,)) > 0.5}
    inits = {"two": np.float32(2.0), "w": randn(3, 4), "lo": np.float32(0.6)}
    p = model(nodes, feeds, ["out"], inits)
    assert after_pass(p, "fuse_elementwise") == ["FusedElementwise"]
    counts = run_checked(p, feeds)
    assert counts == {"FusedElementwise": 1}


def test_dag_reading_x_twice_is_one_kernel():
    nodes = [h.make_node("Div", ["x", "r2"], ["a"]), h.make_node("Erf", ["a"], ["b"]),
             h.make_node("Add", ["b", "one"], ["c"]), h.make_node("Mul", ["x", "c"], ["d"]),
             h.make_node("Mul", ["d", "half"], ["out"])]
    feeds = {"x": randn(5, 7)}
    p = model(nodes, feeds, ["out"], {"r2": np.float32(1.7), "one": np.float32(1), "half": np.float32(0.5)})
    assert run_checked(p, feeds) == {"FusedElementwise": 1}


def test_value_used_outside_the_group_stays_a_kernel_of_its_own():
    nodes = [h.make_node("Exp", ["x"], ["a"]), h.make_node("Neg", ["a"], ["b"]), h.make_node("Relu", ["b"], ["c"]),
             h.make_node("Tanh", ["a"], ["t"])]
    feeds = {"x": randn(4, 4)}
    p = model(nodes, feeds, ["c", "a", "t"])
    assert sorted(after_pass(p, "fuse_elementwise")) == ["Exp", "FusedElementwise", "Tanh"]
    assert run_checked(p, feeds) == {"Exp": 1, "FusedElementwise": 1, "Tanh": 1}


def test_integer_math_and_lone_ops_are_not_fused():
    nodes = [h.make_node("Add", ["i", "j"], ["a"]), h.make_node("Mul", ["a", "j"], ["b"]),
             h.make_node("Relu", ["x"], ["y"])]
    feeds = {"i": np.arange(6, dtype=np.int64).reshape(2, 3), "j": np.full((2, 3), 3, np.int64), "x": randn(3)}
    p = model(nodes, feeds, ["b", "y"])
    assert after_pass(p, "fuse_elementwise") == ["Add", "Mul", "Relu"]
    run_checked(p, feeds)


def test_group_is_capped_by_bindings():
    names = [f"x{i}" for i in range(9)]
    nodes, acc = [], "x0"
    for i, n in enumerate(names[1:]):
        nodes.append(h.make_node("Add", [acc, n], [f"s{i}"]))
        acc = f"s{i}"
    feeds = {n: randn(3, 2) for n in names}
    p = model(nodes, feeds, [acc])
    assert after_pass(p, "fuse_elementwise").count("FusedElementwise") == 2
    assert run_checked(p, feeds) == {"FusedElementwise": 2}


def test_fused_group_with_every_input_known_at_build_time(tmp_path):
    from onnx.reference import ReferenceEvaluator

    from webinfer.build import build
    from webinfer.runtime.inference import InferenceSession

    nodes = [h.make_node("Exp", ["x"], ["a"]), h.make_node("Mul", ["a", "y"], ["b"]), h.make_node("Relu", ["b"], ["c"])]
    feeds = {"x": randn(3, 4), "y": randn(4)}
    p = model(nodes, feeds, ["c"])
    build(p, str(tmp_path / "a.wi"), input_values=feeds)  # no folding of webinfer ops: the lowering runs
    session = InferenceSession(str(tmp_path / "a.wi"))
    got = session.run([o.name for o in session.get_outputs()], {})[0]
    np.testing.assert_allclose(got, ReferenceEvaluator(p).run(None, feeds)[0], rtol=1e-5, atol=1e-6)


def test_integer_and_bool_data_with_a_symbolic_dim_fuse_and_read_shape_scalars_as_uniforms(tmp_path):
    """An attention-mask preamble (transformers' export): int/bool math over Range(0, seq) that no host
    could evaluate (its length is symbolic) becomes one kernel, and ``seq`` itself (shape arithmetic)
    is read as a uniform, not filled into a buffer first."""
    from onnx import TensorProto
    from onnx.reference import ReferenceEvaluator

    from webinfer.build import build
    from webinfer.runtime.inference import InferenceSession

    i64 = lambda name, v: h.make_tensor(name, TensorProto.INT64, [], [v])  # noqa: E731
    nodes = [h.make_node("Shape", ["m"], ["s"]), h.make_node("Gather", ["s", "one"], ["n"]),
             h.make_node("Range", ["zero", "n", "one"], ["r"]),
             h.make_node("Mul", ["r", "n"], ["rn"]), h.make_node("Add", ["rn", "r"], ["a"]),
             h.make_node("GreaterOrEqual", ["r", "zero"], ["ge"]), h.make_node("Less", ["a", "cap"], ["lt"]),
             h.make_node("And", ["ge", "lt"], ["both"]), h.make_node("Where", ["both", "a", "zero"], ["out"])]
    g = h.make_graph(nodes, "mask", [h.make_tensor_value_info("m", TensorProto.INT64, ["batch", "seq"])],
                     [h.make_tensor_value_info("out", TensorProto.INT64, ["seq"])],
                     [i64("zero", 0), i64("one", 1), i64("cap", 20)])
    proto = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    proto.ir_version = 9
    build(proto, str(tmp_path / "a.wi"), target="software")
    session = InferenceSession(str(tmp_path / "a.wi"))
    labels = [s.label for s in session.program.steps]
    assert sorted(labels) == ["elementwise:FusedElementwise", "generate:Range"], labels  # no fill, one kernel
    for seq in (1, 4, 7):
        feeds = {"m": np.ones((2, seq), np.int64)}
        got = session.run(["out"], feeds)[0]
        np.testing.assert_array_equal(got, ReferenceEvaluator(proto).run(None, feeds)[0])
