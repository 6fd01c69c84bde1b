"""If, Loop and Scan against onnx.reference: one artifact, decided per run (no rebuild between feeds)."""

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from webinfer.artifact import program_view
from webinfer.build import build
from webinfer.errors import WebinferError
from webinfer.runtime.inference import InferenceSession

rng = np.random.default_rng(5)
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, opset=21):
    return helper.make_model(helper.make_graph(nodes, "cf", inputs, outputs), opset_imports=[helper.make_opsetid("", opset)])


def session(m, tmp_path):
    """The session and the manifest as its program sees it (artifact.program_view)."""
    build(m, str(tmp_path / "a"))
    sess = InferenceSession(str(tmp_path / "a"))
    return sess, program_view(sess.artifact.manifest, sess.choice.index)


def same(sess, m, feeds, rtol=1e-5, reference="onnx"):
    if reference == "onnx":
        want = ReferenceEvaluator(m).run(None, feeds)
    else:  # onnxruntime: onnx's reference Scan has no input axes or directions
        import onnxruntime as ort

        want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = sess.run(None, feeds)
    for g, w in zip(got, want):
        assert g.shape == np.asarray(w).shape and g.dtype == np.asarray(w).dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-5)


def test_if_picks_its_branch_per_run(tmp_path):
    """The branches compute from outer values (closures) with different kernels; both run from one artifact."""
    then = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["t"]), helper.make_node("Sigmoid", ["t"], ["to"])],
                             "then", [], [vi("to", F, [3, 4])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Exp", ["n"], ["eo"])],
                              "else", [], [vi("eo", F, [3, 4])])
    m = model([helper.make_node("Relu", ["x0"], ["x"]), helper.make_node("If", ["c"], ["y"], then_branch=then,
                                                                         else_branch=other)],
              [vi("c", B, []), vi("x0", F, [3, 4])], [vi("y", F, [3, 4])])
    sess, manifest = session(m, tmp_path)
    assert [c["kind"] for c in manifest["control"]] == ["if"]
    x = rng.standard_normal((3, 4)).astype(np.float32)
    for c in (True, False, True):
        same(sess, m, {"c": np.array(c), "x0": x})


def test_if_condition_computed_on_gpu_and_known_at_build(tmp_path):
    then = helper.make_graph([helper.make_node("Add", ["x", "x"], ["to"])], "then", [], [vi("to", F, [5])])
    other = helper.make_graph([helper.make_node("Sub", ["x", "x"], ["eo"])], "else", [], [vi("eo", F, [5])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    zero = helper.make_tensor("zero", F, [], [0.0])
    m = model(nodes, [vi("x", F, [5])], [vi("y", F, [5])])
    m.graph.initializer.append(zero)
    sess, _ = session(m, tmp_path)
    for sign in (1, -1):
        same(sess, m, {"x": sign * np.abs(rng.standard_normal(5)).astype(np.float32)})
    # a constant condition: only its branch is lowered, no control entry
    m2 = model([helper.make_node("If", ["k"], ["y"], then_branch=then, else_branch=other)], [vi("x", F, [5])],
               [vi("y", F, [5])])
    m2.graph.initializer.append(helper.make_tensor("k", B, [], [False]))
    sess2, manifest2 = session(m2, tmp_path / "k")
    assert manifest2["control"] == []
    same(sess2, m2, {"x": rng.standard_normal(5).astype(np.float32)})


def _while_model():
    """while i < trip and total < limit: total += x * (i + 1); scan output: total after each iteration
    (rank 1: onnx's reference stacks scan outputs with vstack, wrong for higher ranks)."""
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=F),
         helper.make_node("Add", ["fi", "one"], ["k"]),
         helper.make_node("Mul", ["xs", "k"], ["dx"]),
         helper.make_node("Add", ["total_in", "dx"], ["total_out"]),
         helper.make_node("ReduceSum", ["total_out"], ["s"], keepdims=0),
         helper.make_node("Less", ["s", "limit"], ["go"]),
         helper.make_node("Identity", ["total_out"], ["scan"])],
        "body", [vi("i", I64, []), vi("c", B, []), vi("total_in", F, [6])],
        [vi("go", B, []), vi("total_out", F, [6]), vi("scan", F, [6])])
    body.initializer.append(helper.make_tensor("one", F, [], [1.0]))
    # (an explicit initial condition: onnx's reference evaluator runs no iteration when it is omitted)
    nodes = [helper.make_node("Loop", ["trip", "c0", "t0"], ["total", "steps"], body=body)]
    return model(nodes, [vi("trip", I64, []), vi("c0", B, []), vi("limit", F, []), vi("xs", F, [6]),
                         vi("t0", F, [6])],
                 [vi("total", F, [6]), vi("steps", F, None)])


def test_loop_with_data_dependent_condition(tmp_path):
    m = _while_model()
    sess, manifest = session(m, tmp_path)
    (loop,) = manifest["control"]
    assert loop["count"] and loop["cond_out"] and "tensor" in loop["cond_out"]
    from webinfer.report import build_report  # the build report sizes loop counts at their bound

    assert build_report(manifest)["dims"][loop["count"]] == loop["bound"]
    xs = np.abs(rng.standard_normal((6,))).astype(np.float32)
    t0 = rng.standard_normal((6,)).astype(np.float32)
    for trip, limit in ((7, 1e9), (7, 20.0), (3, -1e9), (5, 8.0)):
        same(sess, m, {"trip": np.array(trip, np.int64), "c0": np.array(True), "limit": np.float32(limit), "xs": xs,
                       "t0": t0})
    # no iteration (the reference evaluator cannot stack zero scan outputs): the initial value, no rows
    for trip, c0 in ((0, True), (4, False)):
        total, steps = sess.run(None, {"trip": np.array(trip, np.int64), "c0": np.array(c0), "limit": np.float32(1),
                                       "xs": xs, "t0": t0})
        np.testing.assert_array_equal(total, t0)
        assert steps.shape == (0, 6)


def test_loop_bound_is_enforced(tmp_path, monkeypatch):
    from webinfer.codegen.kernels import control_flow

    monkeypatch.setattr(control_flow, "LOOP_BOUND", 4)
    sess, _ = session(_while_model(), tmp_path)
    feeds = {"trip": np.array(5, np.int64), "c0": np.array(True), "limit": np.float32(1e9),
             "xs": np.ones((6,), np.float32),
             "t0": np.zeros((6,), np.float32)}
    with pytest.raises(WebinferError, match="more than the 4 iterations"):
        sess.run(None, feeds)


def test_loop_slicing_by_its_iteration_checks_the_guard_per_iteration(tmp_path):
    """The body slices a constant at [i, i + 1] (onnx's test_loop11): the build's guard on the slice bounds names
    the iteration dim, so it is checked when the dim is set, not when the feeds are bound (which failed)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["i", "one"], ["end"]),
         helper.make_node("Unsqueeze", ["i", "axes"], ["start1"]),
         helper.make_node("Unsqueeze", ["end", "axes"], ["end1"]),
         helper.make_node("Slice", ["table", "start1", "end1"], ["piece"]),
         helper.make_node("Add", ["y_in", "piece"], ["y_out"]),
         helper.make_node("Identity", ["c"], ["c_out"]),
         helper.make_node("Identity", ["y_out"], ["scan"])],
        "body", [vi("i", I64, []), vi("c", B, []), vi("y_in", F, [1])],
        [vi("c_out", B, []), vi("y_out", F, [1]), vi("scan", F, [1])])
    body.initializer.extend([helper.make_tensor("one", I64, [], [1]), helper.make_tensor("axes", I64, [1], [0])])
    m = model([helper.make_node("Loop", ["trip", "c0", "y0"], ["y", "ys"], body=body)],
              [vi("trip", I64, []), vi("c0", B, []), vi("y0", F, [1])], [vi("y", F, [1]), vi("ys", F, None)])
    m.graph.initializer.append(helper.make_tensor("table", F, [5], [1.0, 2.0, 3.0, 4.0, 5.0]))
    sess, manifest = session(m, tmp_path)
    assert any("__loop" in str(expr) for expr, _ in manifest["guards"])
    for trip in (5, 2, 0):
        feeds = {"trip": np.array(trip, np.int64), "c0": np.array(True), "y0": np.array([-1.0], np.float32)}
        if trip:
            same(sess, m, feeds)
        else:
            np.testing.assert_array_equal(sess.run(None, feeds)[0], feeds["y0"])
    with pytest.raises(WebinferError, match="outside what this artifact was built for: Slice"):
        sess.run(None, {"trip": np.array(6, np.int64), "c0": np.array(True), "y0": np.zeros(1, np.float32)})


@pytest.mark.parametrize("directions", [(0, 0), (1, 1)])
def test_scan_axes_and_directions(tmp_path, directions):
    """Scan over axis 1 of a symbolic-length input, output stacked on axis 1, forward or reversed; a nested Loop
    in the body. Against onnxruntime."""
    inner = helper.make_graph([helper.make_node("Mul", ["a_in", "half"], ["a_out"])], "inner",
                              [vi("j", I64, []), vi("ci", B, []), vi("a_in", F, [3])], [vi("ci", B, []),
                                                                                       vi("a_out", F, [3])])
    body = helper.make_graph(
        [helper.make_node("Add", ["st", "xt"], ["s2"]),
         helper.make_node("Loop", ["two", "", "s2"], ["s3"], body=inner),
         helper.make_node("Mul", ["s3", "xt"], ["o"])],
        "body", [vi("st", F, [3]), vi("xt", F, [3])], [vi("s3", F, [3]), vi("o", F, [3])])
    body.initializer.extend([helper.make_tensor("two", I64, [], [2]), helper.make_tensor("half", F, [], [0.5])])
    scan = helper.make_node("Scan", ["s0", "x"], ["sf", "ys"], body=body, num_scan_inputs=1,
                            scan_input_axes=[1], scan_output_axes=[1], scan_input_directions=[directions[0]],
                            scan_output_directions=[directions[1]])
    m = model([scan], [vi("s0", F, [3]), vi("x", F, [3, "T"])], [vi("sf", F, [3]), vi("ys", F, None)])
    sess, _ = session(m, tmp_path)
    for t in (4, 1, 6):
        same(sess, m, {"s0": rng.standard_normal(3).astype(np.float32),
                       "x": rng.standard_normal((3, t)).astype(np.float32)}, reference="onnxruntime")


def _squeeze_if_one(declared_rank: int):
    """Silero's decoder: ``x.squeeze(-1) if x.shape[-1] == 1 else x``, exported as an If whose branches differ in
    rank; the graph output declares the rank the exporter traced."""
    from onnx import TensorProto, helper, numpy_helper

    def branch(name, node, shape):
        return helper.make_graph([node], name, [], [helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT,
                                                                                 shape)])

    then = branch("then", helper.make_node("Squeeze", ["x", "axis"], ["then_y"]), ["batch"])
    other = branch("else", helper.make_node("Identity", ["x"], ["else_y"]), ["batch", "t"])
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "last"], ["t"], axis=0),
             helper.make_node("Equal", ["t", "one"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "t"][:declared_rank])
    g = helper.make_graph(nodes, "squeeze_if_one", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                  ["batch", "t"])], [out],
                          [numpy_helper.from_array(np.array(-1, np.int64), "last"),
                           numpy_helper.from_array(np.array(1, np.int64), "one"),
                           numpy_helper.from_array(np.array([-1], np.int64), "axis")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_if_on_a_dim_predicate_builds_the_declared_branch(tmp_path):
    """An If on Equal(dim, 1) whose branches differ in rank: the branch that gives the declared output rank is built
    (Squeeze), guarded; equal to onnxruntime where the predicate holds, a one-line refusal where it does not."""
    import onnxruntime as ort

    from webinfer.build import build
    from webinfer.errors import WebinferError
    from webinfer.runtime.inference import InferenceSession

    path = tmp_path / "m.onnx"
    path.write_bytes(_squeeze_if_one(1).SerializeToString())
    build(str(path), str(tmp_path / "a.wi"), target="software")
    session = InferenceSession(str(tmp_path / "a.wi"))
    x = np.random.default_rng(0).standard_normal((3, 1)).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = session.run(None, {"x": x})[0]
    assert got.shape == want.shape == (3,)
    np.testing.assert_array_equal(got, want)
    with pytest.raises(WebinferError, match="the branch built for Equal"):
        session.run(None, {"x": np.ones((3, 4), np.float32)})


def test_if_on_a_dim_predicate_that_cannot_be_guarded_is_refused(tmp_path):
    """Declared rank 2 wants the Identity branch, i.e. t != 1, which no guard of the form expr >= 0 states: one line."""
    from webinfer.build import build
    from webinfer.errors import WebinferError

    path = tmp_path / "m.onnx"
    path.write_bytes(_squeeze_if_one(2).SerializeToString())
    with pytest.raises(WebinferError, match="branches' outputs differ|cannot be guarded|declared ranks"):
        build(str(path), str(tmp_path / "a.wi"), target="software")



def _rate_if_with_dim_predicates():
    """Silero v5/v6's shape: an outer If on a runtime value (``sr == 16000``) whose branches each hold an If on a
    dim predicate with branches of different ranks. 16 kHz squeezes a frame axis of 1; 8 kHz average-pools 3
    frames and squeezes the one left, so its tensors have negative sizes at the 16 kHz frame count."""
    from onnx import numpy_helper

    def half(tag, first, frames):
        then = helper.make_graph([helper.make_node("Squeeze", [f"{tag}_p", "axes"], [f"{tag}_q"])], f"{tag}_then",
                                 [], [vi(f"{tag}_q", F, ["batch"])])
        other = helper.make_graph([helper.make_node("Identity", [f"{tag}_p"], [f"{tag}_i"])], f"{tag}_else", [],
                                  [vi(f"{tag}_i", F, ["batch", 1, "t"])])
        return helper.make_graph(
            [first, helper.make_node("Shape", [f"{tag}_p"], [f"{tag}_s"]),
             helper.make_node("Gather", [f"{tag}_s", "last"], [f"{tag}_t"], axis=0),
             helper.make_node("Equal", [f"{tag}_t", frames], [f"{tag}_c"]),
             helper.make_node("If", [f"{tag}_c"], [f"{tag}_y"], then_branch=then, else_branch=other)],
            tag, [], [vi(f"{tag}_y", F, ["batch"])])

    nodes = [helper.make_node("Equal", ["sr", "rate"], ["is_hi"]),
             helper.make_node("If", ["is_hi"], ["y"],
                              then_branch=half("hi", helper.make_node("Sigmoid", ["x"], ["hi_p"]), "one"),
                              else_branch=half("lo", helper.make_node("AveragePool", ["x"], ["lo_p"], kernel_shape=[3]),
                                               "one"))]
    g = helper.make_graph(nodes, "rates", [vi("x", F, ["batch", 1, "t"]), vi("sr", I64, [])], [vi("y", F, ["batch"])],
                          [numpy_helper.from_array(np.array(-1, np.int64), "last"),
                           numpy_helper.from_array(np.array([1, 2], np.int64), "axes"),
                           numpy_helper.from_array(np.array(1, np.int64), "one"),
                           numpy_helper.from_array(np.array(16000, np.int64), "rate")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_dim_predicate_if_inside_a_branch_is_guarded_only_when_its_branch_runs(tmp_path):
    """Each inner If is built for the branch giving the declared rank, its guards scoped to the outer branch's
    steps (manifest ``branch_guards``): both rates equal onnxruntime from one artifact (the branch not taken is
    left out of the plan where its sizes are negative), and frames that break the guards of the branch that runs
    are refused in one line, whatever the other branch would have needed."""
    import onnxruntime as ort

    m = _rate_if_with_dim_predicates()
    sess, manifest = session(m, tmp_path)
    assert not manifest["guards"]
    branches = [tuple(b) for c in manifest["control"] if c["kind"] == "if" for b in c["branches"]]
    assert {tuple(g[0]) for g in manifest["branch_guards"]} == set(branches)
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for sr, t in ((16000, 1), (8000, 3), (16000, 1), (8000, 3)):  # both branches, alternating on one session
        feeds = {"x": rng.standard_normal((2, 1, t)).astype(np.float32), "sr": np.array(sr, np.int64)}
        want = ref.run(None, feeds)[0]
        got = sess.run(None, feeds)[0]
        assert got.shape == want.shape == (2,)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for sr, t, why in ((16000, 3, r"the branch built for Equal\(t, 1\) == 1"),
                       (8000, 4, r"the branch built for Equal\(t - 2, 1\) == 1"),
                       (8000, 1, r"AveragePool .*: output size t - 2 must be at least 1.*")):
        feeds = {"x": np.ones((2, 1, t), np.float32), "sr": np.array(sr, np.int64)}
        with pytest.raises(WebinferError, match=rf"^input dims t={t} are outside what this artifact was built for: .*{why}$"):
            sess.run(None, feeds)


def test_branch_guards_must_name_an_if_branch(tmp_path):
    """A branch guard whose step range is no If branch's is refused when the manifest is read (one line)."""
    import json

    from webinfer.format.manifest import parse_manifest

    build(_rate_if_with_dim_predicates(), str(tmp_path / "a"), target="software")
    m = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert parse_manifest(m, "m").to_json() == m  # the new field is in the schema
    m["programs"][0]["branch_guards"][0][0] = [0, 1]
    with pytest.raises(WebinferError, match=r"branch_guards\[0\]\[0\].*no If branch's"):
        parse_manifest(m, "m")
