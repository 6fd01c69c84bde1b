"""Weights larger than one binding (codegen/split.py): a tied embedding at Qwen2.5's real vocabulary (151,936
rows) read by Gather/GatherQ and by the tied LM head (MatMulQ, split along N), with the binding limit lowered so
a narrow table (64 wide, small on disk) is split into several parts, against numpy and onnxruntime."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from oprefs import TARGETS, tolerance
from quantref import unpack_reference

from webinfer import InferenceSession
from webinfer.build import build
from webinfer.errors import WebinferError
from webinfer.graph.quantize import quantize_nk
from webinfer.options import LIMITS

VOCAB, WIDTH = 151_936, 64  # Qwen2.5's vocabulary; a narrow table
LIMIT = 4 * 1024 * 1024  # f32 table 38.9 MB: 10 parts; its int8 words 9.7 MB: 3 parts


@pytest.fixture
def small_bindings(monkeypatch):
    """Every limits tier with 4 MiB bindings, so the table and its packed words exceed one."""
    for tier in LIMITS.values():
        monkeypatch.setitem(tier, "max_binding_bytes", LIMIT)


def tied_model(table: np.ndarray) -> onnx.ModelProto:
    """Gather(table, ids) then logits = h @ table^T (the tied head), ids [1, s] with s symbolic."""
    nodes = [helper.make_node("Gather", ["table", "ids"], ["h"]),
             helper.make_node("Transpose", ["table"], ["tt"], perm=[1, 0]),
             helper.make_node("MatMul", ["h", "tt"], ["logits"])]
    g = helper.make_graph(nodes, "tied", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, "s"])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "s", VOCAB])],
                          [onnx.numpy_helper.from_array(table, "table")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def table() -> np.ndarray:
    return np.random.default_rng(3).normal(size=(VOCAB, WIDTH)).astype(np.float32)


# ids in every part, both ends of the table, a negative index, repeats
IDS = ([[151_935]], [[0, 151_935, -1, 17, 17, 76_000, 30_000, 120_001]])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fmt", [None, "int4", "f16"])  # int4 stores the table int8 (as --quantize int8 does)
def test_tied_table_over_one_binding(small_bindings, table, fmt, tmp_path, target):
    proto = tied_model(table)
    for dims in (None, {"s": 1}):  # symbolic rows (GEMM, or GEMV under its `when`), one row (the decode GEMV)
        out = str(tmp_path / f"t{bool(dims)}.wi")
        build(proto, out, quantize=fmt, target=target, dims=dims)
        sess = InferenceSession(out)
        shapes = [w["shape"] for w in (sess.artifact.manifest["tensors"][t] for t in sess.program.weights)]
        assert len(shapes) >= 3 and all(s[0] < VOCAB for s in shapes), shapes  # stored as parts
        weight_bytes = sum(s["bytes"] for s in sess.artifact.manifest["shards"])
        # the gather and the head share them
        assert weight_bytes < table.nbytes * {None: 1.01, "f16": 0.51}.get(fmt, 0.3)
        table_fmt = {None: None, "int8": "int8", "int4": "int8", "f16": "f16"}[fmt]  # tables stay int8 under int4
        ref = (table.astype(np.float64) if fmt is None
               else unpack_reference(*quantize_nk(table, table_fmt), table_fmt, WIDTH))
        for ids in IDS if dims is None else IDS[:1]:
            ids = np.array(ids, np.int64)
            h = ref[ids % VOCAB]
            logits = sess.run(None, {"ids": ids})[0]
            np.testing.assert_allclose(logits, h @ ref.T, *tolerance(target, 1e-4, 1e-3))
            if fmt is None:  # and onnxruntime's
                want = ort.InferenceSession(proto.SerializeToString()).run(None, {"ids": ids})[0]
                np.testing.assert_allclose(logits, want, *tolerance(target, 1e-4, 1e-3))


@pytest.mark.parametrize("target", TARGETS)
def test_untied_f32_head_over_one_binding(small_bindings, tmp_path, target):
    """A plain f32 MatMul weight [K, N] over one binding (an untied head, outside a generation build) is stored
    N-major in parts along N (graph/quantize.py), decode and prefill, against numpy."""
    w = np.random.default_rng(4).normal(size=(WIDTH, VOCAB)).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "head",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "s", WIDTH])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "s", VOCAB])],
                          [onnx.numpy_helper.from_array(w, "w")])
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    for dims, rows in ((None, (1, 5)), ({"s": 1}, (1,))):
        out = str(tmp_path / f"h{bool(dims)}.wi")
        build(proto, out, target=target, dims=dims)
        sess = InferenceSession(out)
        assert len(sess.program.weights) >= 3
        for s in rows:
            x = np.random.default_rng(s).normal(size=(1, s, WIDTH)).astype(np.float32)
            np.testing.assert_allclose(sess.run(None, {"x": x})[0], x.astype(np.float64) @ w,
                                       *tolerance(target, 1e-4, 1e-3))


def test_what_is_not_split_is_one_line(small_bindings, tmp_path):
    """A table over one binding read along another axis is not split: the build says so in one line."""
    table = np.zeros((WIDTH, VOCAB), np.float32)
    g = helper.make_graph([helper.make_node("Gather", ["table", "ids"], ["y"], axis=1)], "cols",
                          [helper.make_tensor_value_info("ids", TensorProto.INT64, ["s"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [WIDTH, "s"])],
                          [onnx.numpy_helper.from_array(table, "table")])
    with pytest.raises(WebinferError, match=rf"^index:Gather: a tensor of {table.nbytes} bytes exceeds the binding "
                                            rf"limit \({LIMIT}\)$"):
        build(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "c.wi"))
