"""The ONNX node-test ratchet: every case that expected.tsv lists as 'pass' must still pass.

The sweep itself lives in ``run.py`` (``python -m tests.conformance.run --update`` refreshes the list).
The small tests below check the runner's own rules (comparison, placement, categories) on hand-made
inputs, so a bug in the runner cannot make the ratchet pass or fail for the wrong reason.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from onnx import TensorProto, helper

from . import categories, run
from .cases import check_placement, compare


def _report(capsys, lines: list[str]) -> None:
    """Print even under pytest's output capture (no -s needed)."""
    with capsys.disabled():
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()


@pytest.mark.slow
def test_node_tests_ratchet(capsys):
    expected = run.read_expected()
    assert len(expected) == run.TOTAL, f"expected.tsv lists {len(expected)} cases, not {run.TOTAL}"
    cases = run.all_cases()
    assert len(cases) == run.TOTAL, f"{len(cases)} node tests on disk (onnx 1.22.0 ships {run.TOTAL})"
    results, seconds = run.run_sweep(cases, jobs=2, timeout=run.CASE_TIMEOUT)
    lines = run.summarize(results)
    lines.append(f"sweep: {len(cases)} cases in {seconds:.0f} s")
    gained = sorted(c for c, r in results.items() if r.status == "pass" and expected[c].status != "pass")
    if gained:
        lines.append(f"newly passing, not yet in expected.tsv ({len(gained)}): {' '.join(gained[:30])}"
                     + (" ..." if len(gained) > 30 else "")
                     + "  (run: python -m tests.conformance.run --update)")
    _report(capsys, [""] + lines)
    lost = {c: results[c].reason for c, r in expected.items() if r.status == "pass" and results[c].status != "pass"}
    assert not lost, f"{len(lost)} node tests regressed:\n" + "\n".join(f"  {c}: {w}" for c, w in sorted(lost.items()))


# -- the runner's rules ------------------------------------------------------------------------------
def test_compare_rules():
    a = np.array([1.0, np.nan, np.inf], dtype=np.float32)
    assert compare([a], [a.copy()]) is None
    assert compare([a], [a + np.float32(1e-3) * np.array([1, 0, 0], np.float32)]) is None  # within rtol
    assert "mismatch" in compare([a], [np.array([1.1, np.nan, np.inf], np.float32)])
    assert "NaN" in compare([a], [np.array([1.0, 0.0, np.inf], np.float32)])
    assert "infinities" in compare([a], [np.array([1.0, np.nan, -np.inf], np.float32)])
    assert "dtype" in compare([a], [a.astype(np.float64)])
    assert "shape" in compare([a], [a.reshape(3, 1)])
    assert "differ" in compare([np.array([1, 2])], [np.array([1, 3])])
    assert "outputs" in compare([a, a], [a])
    import ml_dtypes  # bfloat16/float8 compare as floats (NaNs equal), like onnx's own runner

    b = np.array([1.0, np.nan, 3.0], np.float32).astype(ml_dtypes.float8_e4m3fn)
    assert compare([b], [b.copy()]) is None
    assert "mismatch" in compare([b], [np.array([1.0, np.nan, 3.5], np.float32).astype(ml_dtypes.float8_e4m3fn)])


def _range_model():
    nodes = [helper.make_node("Range", ["s", "l", "d"], ["y"])]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, []) for n in "sld"]
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def _model(nodes, inputs, outputs):
    g = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def test_placement_rule():
    rng = _range_model()
    assert "Range ran as folded" in check_placement(rng, [{"node": 0, "op": "Range", "where": "folded",
                                                                "elements": ["5"]}])
    assert check_placement(rng, [{"node": 0, "op": "Range", "where": "gpu", "elements": ["5"]}]) is None
    assert "cannot match" in check_placement(rng, [])
    # A float tensor built at build time from Shape(x) (a mask, a constant of that shape) is fine.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    masked = _model([helper.make_node("Shape", ["x"], ["s"]), helper.make_node("ConstantOfShape", ["s"], ["c"]),
                     helper.make_node("Add", ["x", "c"], ["y"])], [x], [y])
    rows = [{"node": 0, "op": "Shape", "where": "host", "elements": ["2"]},
            {"node": 1, "op": "ConstantOfShape", "where": "folded", "elements": ["6"]},
            {"node": 2, "op": "Add", "where": "gpu", "elements": ["6"]}]
    assert check_placement(masked, rows) is None
    # Data computed from x's values must not be folded or run on the host.
    data = _model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])], [x], [y])
    rows = [{"node": 0, "op": "Relu", "where": "gpu", "elements": ["6"]},
            {"node": 1, "op": "Neg", "where": "host", "elements": ["6"]}]
    assert "Neg ran as host" in check_placement(data, rows)
    # Integer shape arithmetic on the host is fine up to 64 elements, not beyond.
    xi = helper.make_tensor_value_info("x", TensorProto.INT64, [100])
    yi = helper.make_tensor_value_info("y", TensorProto.INT64, [100])
    ints = _model([helper.make_node("Neg", ["x"], ["y"])], [xi], [yi])
    assert "100 elements" in check_placement(ints, [{"node": 0, "op": "Neg", "where": "host",
                                                          "elements": ["100"]}])
    assert check_placement(ints, [{"node": 0, "op": "Neg", "where": "host", "elements": ["8"]}]) is None


def test_categories():
    def model(node, in_type=TensorProto.FLOAT, domain=""):
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", in_type, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
        return helper.make_model(g, opset_imports=[helper.make_opsetid(domain, 1), helper.make_opsetid("", 18)])

    assert categories.categorize("t", model(helper.make_node("Relu", ["x"], ["y"]))) == "todo"
    assert categories.categorize("t", model(helper.make_node("Cast", ["x"], ["y"]), TensorProto.STRING)) == "dtype-string"
    assert categories.categorize("t", model(helper.make_node("Cast", ["x"], ["y"], to=TensorProto.COMPLEX64))) == "dtype-complex"
    # packed low-precision types are supported (no longer a permanent category)
    assert categories.categorize("t", model(helper.make_node("Cast", ["x"], ["y"], to=TensorProto.BFLOAT16))) == "todo"
    assert categories.categorize("t", model(helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT4))) == "todo"
    assert categories.categorize("t", model(helper.make_node("Bernoulli", ["x"], ["y"]))) == "random"
    train = helper.make_node("Adam", ["x"], ["y"], domain="ai.onnx.preview.training")
    assert categories.categorize("t", model(train, domain="ai.onnx.preview.training")) == "training"
    seq = helper.make_tensor_sequence_value_info("x", TensorProto.FLOAT, [2])
    g = helper.make_graph([helper.make_node("SequenceLength", ["x"], ["y"])], "g", [seq],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, [])])
    assert categories.categorize("t", helper.make_model(g)) == "todo"  # sequences are supported


def test_expected_list_is_complete():
    expected = run.read_expected()
    assert sorted(expected) == run.all_cases()
    assert all(r.status in ("pass", "fail") for r in expected.values())
    assert all(r.category for r in expected.values() if r.status == "fail")
