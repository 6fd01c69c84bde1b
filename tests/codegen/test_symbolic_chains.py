"""Deep chains of symbolic spatial dims, as real detectors have them (no package needed): seven stride-2 convs and a
ceil-mode pool down, an FPN back up (Resize x2 + Add of the skip), a ConvTranspose, sizes from Shape -> Gather ->
Div, and a float Range over a feature map's width. Built once, run at three sizes, compared with onnxruntime;
the manifest's dim expressions stay small (canonical floor divisions: ``(H + 127) // 128``, not 7 nested ones).

The dims rules themselves are checked against Python's integer arithmetic on every value of a range."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from webinfer import dims as D
from webinfer import shape_ops
from webinfer.build import build
from webinfer.errors import WebinferError
from webinfer.graph import shapes
from webinfer.graph.importer import import_model
from webinfer.runtime.inference import InferenceSession

N = helper.make_node
LEVELS = 7  # stride 2**7 = 128 at the bottom
SIZES = [(128, 256), (256, 128), (384, 128)]
rng = np.random.default_rng(0)


def _chain_model():
    c = 4
    inits = {"wi": rng.standard_normal((c, 3, 3, 3)).astype(np.float32) * 0.3,
             "wt": rng.standard_normal((c, 2, 2, 2)).astype(np.float32) * 0.3,
             "sc": np.array([1, 1, 2, 2], np.float32), "i2": np.array([2], np.int64), "i3": np.array([3], np.int64),
             "two": np.array([2], np.int64), "m1": np.array([-1], np.int64), "one": np.array([1], np.int64),
             "f0": np.array(0.0, np.float32), "f1": np.array(1.0, np.float32)}
    nodes = [N("Conv", ["x", "wi"], ["d0"], pads=[1, 1, 1, 1])]
    for i in range(1, LEVELS + 1):
        inits[f"w{i}"] = rng.standard_normal((c, c, 3, 3)).astype(np.float32) * 0.3
        if i == 3:  # a ceil-mode pool in the chain (ONNX's min() of two output sizes)
            nodes.append(N("MaxPool", [f"d{i - 1}"], [f"d{i}"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1))
        else:
            nodes += [N("Conv", [f"d{i - 1}", f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1], strides=[2, 2]),
                      N("Relu", [f"c{i}"], [f"d{i}"])]
    up = f"d{LEVELS}"
    for i in range(LEVELS - 1, 0, -1):  # FPN: upsample and add the skip (equal only when 128 divides H and W)
        nodes += [N("Resize", [up, "", "sc"], [f"r{i}"], mode="nearest"), N("Add", [f"r{i}", f"d{i}"], [f"u{i}"])]
        up = f"u{i}"
    nodes.append(N("ConvTranspose", [up, "wt"], ["full"], strides=[2, 2]))
    # sizes from Shape -> Gather -> Div: [N, C*2, H/2, W] through a Reshape
    nodes += [N("Shape", ["full"], ["sh"]), N("Gather", ["sh", "i2"], ["h"]), N("Div", ["h", "two"], ["h2"]),
              N("Gather", ["sh", "i3"], ["w"]), N("Concat", ["one", "m1", "h2", "w"], ["target"], axis=0),
              N("Reshape", ["full", "target"], ["y"])]
    # PyTorch's arange(w, dtype=float) over a feature map: a float Range whose length is a dim
    nodes += [N("Shape", [f"d{LEVELS - 2}"], ["s5"]), N("Gather", ["s5", "i3"], ["wd5"]),
              N("Squeeze", ["wd5"], ["w5s"]), N("Cast", ["w5s"], ["w5f"], to=TensorProto.FLOAT),
              N("Range", ["f0", "w5f", "f1"], ["r"])]
    # a third of the width, Div(Shape(x)[3], 3): graph/shapes.py once gave 0 for W / 3 (and folded it)
    inits.update({"three": np.array([3], np.int64), "z": np.array([0], np.int64)})
    nodes += [N("Shape", ["x"], ["sx"]), N("Gather", ["sx", "i3"], ["wx"]), N("Div", ["wx", "three"], ["wthird"]),
              N("Slice", ["x", "z", "wthird", "i3"], ["third"])]
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])],
                          [helper.make_empty_tensor_value_info(n) for n in ("y", "r", "third")],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


def _depth(j) -> int:
    """Nesting of a serialised dim expression (the manifest's JSON)."""
    return 1 + max((_depth(x) for x in j[1:]), default=0) if isinstance(j, list) else 0


@pytest.fixture(scope="module")
def chain():
    model = _chain_model()
    out = Path(tempfile.mkdtemp(prefix="webinfer-chain-"))
    build(model, str(out), target="software")
    return model, out


def test_deep_chain_builds_once_and_matches_onnxruntime(chain):
    model, out = chain
    session = InferenceSession(str(out))
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for h, w in SIZES:
        x = rng.standard_normal((1, 3, h, w)).astype(np.float32)
        got, want = session.run(None, {"x": x}), ref.run(None, {"x": x})
        for g, r in zip(got, want):
            assert g.shape == r.shape, (h, w)
            np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4 * np.abs(r).max(), err_msg=f"at {(h, w)}")


def test_deep_chain_dim_expressions_stay_small(chain):
    _, out = chain
    manifest = json.loads((out / "manifest.json").read_text())
    dims = [d for t in manifest["tensors"] for d in t["shape"]]
    dims += [g for p in manifest["programs"] for s in p["steps"] for g in s["grid"]]
    dims += [u[2] for p in manifest["programs"] for s in p["steps"] for u in s["uniforms"]]
    # the bottom of the chain is one division, (H + 127) // 128, whatever the number of levels
    assert any(D.json_text(d) == "((H + 127) // 128)" for d in dims)
    assert max(_depth(d) for d in dims) <= 8


def test_deep_chain_refuses_sizes_whose_skips_do_not_match(chain):
    # onnxruntime refuses these too (its Add cannot broadcast 2 against 3); ours names the condition
    _, out = chain
    with pytest.raises(WebinferError, match="broadcasting needs"):
        InferenceSession(str(out)).run(None, {"x": np.zeros((1, 3, 200, 128), np.float32)})


def test_graph_shapes_agree_with_onnxruntime_on_the_chain():
    """graph/shapes.py infers the windows' sizes with the lowerings' rule (shape_ops.window_axis): every value's
    shape, evaluated at H and W, is the shape onnxruntime gives it (ONNX's own inference leaves them unknown)."""
    model = import_model(_chain_model())
    si = shapes.ShapeInference(model).run()
    known = {v: s for v, s in si.shapes.items() if v.name and s is not None and all(d is not None for d in s)}
    bottom = next(v for v in known if v.name == f"d{LEVELS}")
    assert D.to_text(known[bottom][2]) == "((H + 127) // 128)"
    for v in known:
        v.shape = None
    model.graph.outputs.extend(v for v in known if not v.is_graph_output())
    proto = ir.serde.serialize_model(model)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    for h, w in SIZES[:2]:
        got = dict(zip(names, sess.run(None, {"x": np.zeros((1, 3, h, w), np.float32)})))
        for v, shape in known.items():
            want = [D.evaluate(D.to_json(d), {"H": h, "W": w}) for d in shape]
            assert list(got[v.name].shape) == want, (v.name, h, w, [D.to_text(d) for d in shape])


def _conv(size: int, k: int, s: int, pad: int) -> int:
    return (size + 2 * pad - k) // s + 1


@pytest.mark.parametrize("k,s,pad", [(3, 2, 1), (1, 2, 0), (5, 2, 2), (3, 3, 1), (2, 2, 0)])
def test_window_chains_are_one_division(k, s, pad):
    """``floor((x + 2p - k) / s) + 1`` nested eight times is one floor division, equal to the nested
    integers at every size (dims are sizes: 0..600)."""
    h = D.Sym.name("H")
    d = h
    for _ in range(8):
        d = D.add(D.floordiv(D.add(d, 2 * pad - k), s), 1)
    assert _depth(D.to_json(d)) <= 5, D.to_text(d)
    for size in range(0, 600):
        want = size
        for _ in range(8):
            want = _conv(want, k, s, pad)
        assert D.evaluate(D.to_json(d), {"H": size}) == want, (size, D.to_text(d))


def test_ceil_mode_pool_chains_are_one_division():
    """GoogLeNet's 3x3 stride-2 ceil-mode pools (each a min of two sizes in ONNX's rule) between same-size convs,
    four times: the mins are decided (H // 2 <= (H + 1) // 2), so the size is H // 16, equal to ONNX's integers."""
    h = D.Sym.name("H")
    d = h
    for _ in range(4):
        d = shape_ops.window_axis(d, 3, 2, 1, 0, 0, ceil_mode=True)[0]
        d = shape_ops.window_axis(d, 3, 1, 1, 1, 1)[0]
    assert D.to_text(d) == "(H // 16)"
    for size in range(3, 400):
        want = size
        for _ in range(4):
            out = -(-(want - 3) // 2) + 1
            want = out - 1 if (out - 1) * 2 >= want else out
        assert D.evaluate(D.to_json(d), {"H": size}) == want, size


def test_dims_rules_agree_with_integers():
    h, w = D.Sym.name("H"), D.Sym.name("W")
    cases = {
        "(2H + 3) // 2": (D.floordiv(D.add(D.mul(h, 2), 3), 2), lambda H, W: (2 * H + 3) // 2),
        "(H - 7) // 4 // 3": (D.floordiv(D.floordiv(D.add(h, -7), 4), 3), lambda H, W: (H - 7) // 4 // 3),
        "((H//2 + W) // 3)": (D.floordiv(D.add(D.floordiv(h, 2), w), 3), lambda H, W: (H // 2 + W) // 3),
        "(4H + 6) % 4": (D.mod(D.add(D.mul(h, 4), 6), 4), lambda H, W: (4 * H + 6) % 4),
        "(6W + H + 5) % 3": (D.mod(D.add(D.add(D.mul(w, 6), h), 5), 3), lambda H, W: (6 * W + H + 5) % 3),
        "max(H + 1, H)": (D.dmax(D.add(h, 1), h), lambda H, W: H + 1),
        "min(H // 2, W)": (D.dmin(D.floordiv(h, 2), w), lambda H, W: min(H // 2, W)),
        "min(H // 2, (H + 1) // 2)": (D.dmin(D.floordiv(h, 2), D.floordiv(D.add(h, 1), 2)), lambda H, W: H // 2),
        "max(2*(H // 2), H - 1)": (D.dmax(D.mul(D.floordiv(h, 2), 2), D.add(h, -1)), lambda H, W: max(H // 2 * 2, H - 1)),
        "Div(6HW, 3W)": (shape_ops.host_op("Div", [D.mul(D.mul(h, w), 6), D.mul(w, 3)]), lambda H, W: 2 * H),
        "Div(W, 2)": (shape_ops.host_op("Div", [w, 2]), lambda H, W: W // 2),
    }
    for name, (expr, fn) in cases.items():
        for H in range(0, 40):
            for W in (1, 2, 7, 64):
                assert D.evaluate(D.to_json(expr), {"H": H, "W": W}) == fn(H, W), (name, H, W, D.to_text(expr))
    assert D.dmax(h, w) == D.dmax(w, h)
    assert shape_ops.host_op("Less", [h, D.add(h, 1)]) == 1 and shape_ops.host_op("Equal", [h, D.add(h, 2)]) == 0
    with pytest.raises(shape_ops.Undecidable):
        shape_ops.host_op("Less", [h, w])


def test_paddle_style_anonymous_dims_are_each_their_own():
    """Paddle's exporter declares [-1, 3, "?", "?"]: the -1 is a dim of any size, and the two "?" need not be
    equal (onnxruntime runs 48x192); each becomes a dim of its own."""
    w = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "?", "?"])
    x_info.type.tensor_type.shape.dim[0].dim_value = -1
    g = helper.make_graph([N("Conv", ["x", "w"], ["c"], strides=[2, 2]), N("Relu", ["c"], ["y"])], "paddle", [x_info],
                          [helper.make_empty_tensor_value_info("y")], [numpy_helper.from_array(w, "w")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    out = tempfile.mkdtemp(prefix="webinfer-paddle-")
    build(model, out, target="software")
    session = InferenceSession(out)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert len(session.artifact.manifest["dims"]) == 3
    for shape in [(1, 3, 12, 40), (2, 3, 9, 7)]:
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(session.run(None, {"x": x})[0], ref.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4)


def _squeeze_all_model(declared_rank_zero: bool):
    """A score head as speechmos' PLCMOS ends: Gemm to [batch, 1], Squeeze without axes, Sigmoid; the exporter traced
    batch 1, so its declared output is a scalar (or, here, also the [batch] a batch-keeping export declares)."""
    w = np.random.default_rng(3).standard_normal((8, 1)).astype(np.float32)
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [] if declared_rank_zero else ["batch"])
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Squeeze", ["m"], ["s"]),
                           helper.make_node("Sigmoid", ["s"], ["y"])], "head",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])], [out],
                          [numpy_helper.from_array(w, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_squeeze_without_axes_follows_the_declared_rank(tmp_path):
    """Squeeze without axes over a symbolic dim: where the declared output drops it (a batch traced at 1), webinfer
    drops it too and guards it == 1 (onnxruntime's rank there); other sizes get a one-line error, not a wrong rank."""
    model = _squeeze_all_model(True)
    path = tmp_path / "head.onnx"
    path.write_bytes(model.SerializeToString())
    build(str(path), str(tmp_path / "a.wi"))
    session = InferenceSession(str(tmp_path / "a.wi"))
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(4).standard_normal((1, 8)).astype(np.float32)
    (want,), (got,) = ref.run(None, {"x": x}), session.run(None, {"x": x})
    assert got.shape == want.shape == ()
    np.testing.assert_allclose(got, want, rtol=1e-5)
    with pytest.raises(WebinferError, match="Squeeze"):
        session.run(None, {"x": np.ones((2, 8), np.float32)})


def test_squeeze_without_axes_keeps_a_declared_symbolic_dim(tmp_path):
    model = _squeeze_all_model(False)
    path = tmp_path / "head.onnx"
    path.write_bytes(model.SerializeToString())
    build(str(path), str(tmp_path / "a.wi"))
    session = InferenceSession(str(tmp_path / "a.wi"))
    x = np.random.default_rng(5).standard_normal((3, 8)).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = session.run(None, {"x": x})[0]
    assert got.shape == want.shape == (3,)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_squeeze_without_axes_chosen_by_the_outputs_declared_ranks(tmp_path):
    """Nothing declares the Squeeze's own rank and a Slice follows it (speechmos' AECMOS head): keeping the batch
    would make the graph output rank 2 where the export declares 1, so the batch is dropped (guarded == 1)."""
    g = helper.make_graph(
        [helper.make_node("Squeeze", ["x"], ["s"]),
         helper.make_node("Slice", ["s", "st", "en", "ax"], ["c"]), helper.make_node("Sigmoid", ["c"], ["y"])], "h",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])],
        [numpy_helper.from_array(np.array([2], np.int64), n) if n != "ax" else
         numpy_helper.from_array(np.array([0], np.int64), n) for n in ("st", "ax")] +
        [numpy_helper.from_array(np.array([4], np.int64), "en")])
    path = tmp_path / "head.onnx"
    path.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    build(str(path), str(tmp_path / "a.wi"))
    session = InferenceSession(str(tmp_path / "a.wi"))
    x = np.random.default_rng(6).standard_normal((1, 6, 1)).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = session.run(None, {"x": x})[0]
    assert got.shape == want.shape == (2,)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    with pytest.raises(WebinferError, match="Squeeze"):
        session.run(None, {"x": np.ones((2, 6, 1), np.float32)})


@pytest.mark.parametrize("declared", [["out_dim_0"], [7]])
def test_squeeze_without_axes_ignores_an_untraced_declared_rank(tmp_path, declared):
    """madmom's converter declares every output [n]: a sequence head [frames, 1, 3] squeezed without axes is
    declared rank 1, which only dropping ``frames`` would give, yet as a named dim (or a size other than the 3
    that drop leaves) no exporter tracing frames at 1 wrote it. ONNX's rule stands: frames is kept, as
    onnxruntime keeps it, not guarded == 1."""
    w = np.random.default_rng(8).standard_normal((4, 3)).astype(np.float32)
    g = helper.make_graph(
        [N("Unsqueeze", ["x", "ax"], ["u"]), N("MatMul", ["u", "w"], ["m"]), N("Squeeze", ["m"], ["y"])], "seq",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["frames", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, declared)],
        [numpy_helper.from_array(np.array([1], np.int64), "ax"), numpy_helper.from_array(w, "w")])
    path = tmp_path / "seq.onnx"
    path.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString())
    build(str(path), str(tmp_path / "a.wi"))
    session = InferenceSession(str(tmp_path / "a.wi"))
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for frames in (5, 12):
        x = np.random.default_rng(frames).standard_normal((frames, 4)).astype(np.float32)
        want, got = ref.run(None, {"x": x})[0], session.run(None, {"x": x})[0]
        assert got.shape == want.shape == (frames, 3)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_traced_squeeze_fits():
    named, batch, unnamed = ir.SymbolicDim("n"), ir.SymbolicDim("batch_size"), ir.SymbolicDim(None)
    inputs = {"batch_size", "frames"}
    assert shape_ops.traced_squeeze_fits(("batch", 1), [], inputs)                # a score traced at batch 1
    assert shape_ops.traced_squeeze_fits(("frames", 3), [3], inputs)
    assert shape_ops.traced_squeeze_fits(("frames", 3), [unnamed], inputs)
    assert shape_ops.traced_squeeze_fits(("batch_size", 1, 2), [batch], inputs)   # AECMOS: a dynamic axis' name
    assert not shape_ops.traced_squeeze_fits(("frames", 3), [named], inputs)      # madmom: a fresh name
    assert not shape_ops.traced_squeeze_fits(("frames", 3), [7], inputs)
    assert shape_ops.traced_squeeze_fits(("frames", 3), [named, 3], inputs)       # another rank: decided elsewhere
