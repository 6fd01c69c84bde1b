"""Quantized and decode-shaped matmuls (graph/quantize.py + kernels/quant_matmul.py) against numpy.

The reference weights are unpacked here, bit by bit, independently of webinfer's own dequantizer; the
products are float64 numpy. One artifact per case has a symbolic row count, so the same build runs the
matrix-vector step (rows == 1) and the matrix-matrix step (rows > 1).
"""

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper
from oprefs import TARGETS, tolerance
from quantref import dp4a_reference, unpack_reference

from webinfer import InferenceSession
from webinfer.build import build
from webinfer.graph.quantize import quantize_nk, quantize_weights
from webinfer.options import KERNEL_CLASSES

rng = np.random.default_rng(7)




def model_with(nodes, inputs, outputs, inits) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "q", inputs, outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def rows_matmul(w: np.ndarray) -> onnx.ModelProto:
    """x[s, k] @ w[k, n], s symbolic (prefill and decode in one build)."""
    k, n = w.shape
    return model_with([helper.make_node("MatMul", ["x", "w"], ["y"])],
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["s", k])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["s", n])],
                      [onnx.numpy_helper.from_array(w, "w")])


def build_quantized(proto: onnx.ModelProto, fmt, tmp_path, target: str = "software",
                    dims: dict | None = None) -> InferenceSession:
    out = str(tmp_path / f"m{len(dims or {})}.wi")
    build(proto, out, quantize=fmt, target=target, dims=dims)
    return InferenceSession(out)


@pytest.mark.parametrize("fmt", ["int8", "int4"])
def test_packing_recovers_weights(fmt):
    w = rng.normal(size=(6, 70)).astype(np.float32)
    words, params = quantize_nk(w, fmt)
    ref = unpack_reference(words, params, fmt, 70)
    step = np.abs(w).max() / 127 if fmt == "int8" else (w.max() - w.min()) / 15
    assert np.abs(ref - w).max() <= 0.5 * step + 1e-6


def test_int4_recovers_q4_1_blocks_exactly():
    """Weights that already are Q4_1 values (GGUF: d * q + m per block of 32) come back unchanged."""
    q = rng.integers(0, 16, size=(5, 64))
    q[:, ::32], q[:, 1::32] = 0, 15  # every block spans the full range, like ggml's quantizer makes it
    d = rng.uniform(0.01, 0.1, size=(5, 2)).astype(np.float32)
    m = rng.uniform(-1, 0, size=(5, 2)).astype(np.float32)
    w = (q.reshape(5, 2, 32) * d[..., None] + m[..., None]).reshape(5, 64).astype(np.float32)
    words, params = quantize_nk(w, "int4")
    assert np.abs(unpack_reference(words, params, "int4", 64) - w).max() < 1e-6


@pytest.mark.parametrize("target", TARGETS + ("software-q8", "software-subgroups"))
@pytest.mark.parametrize("fmt", ["int8", "int4"])
@pytest.mark.parametrize("k,n", [(64, 40), (70, 5), (36, 9), (96, 33), (32, 1), (600, 7)])
def test_matmul_q(fmt, k, n, tmp_path, target):
    check_matmul_q(fmt, k, n, tmp_path, target)


@pytest.mark.parametrize("target", TARGETS + ("software-subgroups",))
@pytest.mark.parametrize("k,n", [(70, 5), (96, 33), (600, 7)])
def test_matmul_f16_weights(k, n, tmp_path, target):
    """--quantize f16: rows of K padded to whole vec4s (70), a partial column tile (33), a long K."""
    check_matmul_q("f16", k, n, tmp_path, target)


def check_matmul_q(fmt, k, n, tmp_path, target):
    w = rng.normal(size=(k, n)).astype(np.float32)
    proto = model_with([helper.make_node("MatMul", ["x", "w"], ["y"])],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s", k])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "s", n])],
                       [onnx.numpy_helper.from_array(w, "w")])
    # Symbolic rows outside a generation build: one GEMM step, which also serves a single row; rows fixed
    # at 1: the decode GEMV (a decoder's artifact carries both, each under its `when`: tests/llm).
    gemm = build_quantized(proto, fmt, tmp_path, target)
    gemv = build_quantized(proto, fmt, tmp_path, target, dims={"b": 1, "s": 1})
    words, params = quantize_nk(w.T, fmt)
    ref_w = unpack_reference(words, params, fmt, k).T
    q8 = KERNEL_CLASSES[target].int8_activations(fmt)
    for sess, shapes, steps in ((gemm, [(1, 1, k), (1, 5, k), (2, 19, k)], 1), (gemv, [(1, 1, k)], 2 if q8 else 1)):
        labels = [s.label for s in sess.program.steps]
        assert [lb.split(":")[1] for lb in labels] == ["MatMulQ"] * steps, labels  # int8 activations: x quantized first
        for shape in shapes:
            x = rng.normal(size=shape).astype(np.float32)
            y = sess.run(None, {"x": x})[0]
            if q8 and sess is gemv:  # the decode GEMV on int8 activations (dp4a, or the software class's int4)
                want = dp4a_reference(x.reshape(-1), ref_w, params, fmt)
                np.testing.assert_allclose(y.reshape(-1), want, rtol=1e-4, atol=1e-4 * np.sqrt(k))
                continue
            np.testing.assert_allclose(y, x.astype(np.float64) @ ref_w, *tolerance(target, 1e-4, 1e-4 * np.sqrt(k)))


@pytest.mark.parametrize("tiles", ["balanced", "startup"])
@pytest.mark.parametrize("fmt", ["int8", "int4"])
def test_software_gemm_tiles(fmt, tiles, tmp_path):
    """The software class's prefill GEMM on its big tile (balanced) and on the quick-to-compile one (startup):
    partial tiles in both directions."""
    k, n = 96, 37
    w = rng.normal(size=(k, n)).astype(np.float32)
    m = build(rows_matmul(w), str(tmp_path), quantize=fmt, target="software", tiles=tiles)
    tile = m["options"]["kernel_classes"]["software"]["quant_gemm"]
    assert (tile["tm"], tile["tn"]) == ((8, 16) if tiles == "balanced" else (4, 4))
    words, params = quantize_nk(w.T, fmt)
    ref_w = unpack_reference(words, params, fmt, k).T
    sess = InferenceSession(str(tmp_path))
    for rows in (2, 9, 70):
        x = rng.normal(size=(rows, k)).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], x.astype(np.float64) @ ref_w, rtol=1e-4,
                                   atol=1e-4 * np.sqrt(k))


@pytest.mark.parametrize("tiles", ["balanced", "startup"])
@pytest.mark.parametrize("fmt", ["int8", "int4"])
def test_weights_as_textures(fmt, tiles, tmp_path):
    """The software class binds packed words and block parameters as textures (format/textures.py) for the
    GEMV and the GEMM; startup tiles (pages) keep buffers. 700 x 512 spans many texture rows and leaves the
    last one part-filled; 1 row and 70 rows against numpy."""
    k, n = 512, 700
    w = rng.normal(size=(k, n)).astype(np.float32)
    m = build(rows_matmul(w), str(tmp_path), quantize=fmt, target="software", tiles=tiles)
    textures = dict(m["programs"][0]["textures"])
    if tiles == "startup":
        assert textures == {}
    else:
        assert sorted(textures.values()) == sorted(["rgba32uint", "rg32float" if fmt == "int4" else "r32float"])
        assert all(m["tensors"][t]["kind"] == "weight" for t in textures)
    words, params = quantize_nk(w.T, fmt)
    ref_w = unpack_reference(words, params, fmt, k).T
    sess = InferenceSession(str(tmp_path))
    for rows in (1, 70):
        x = rng.normal(size=(rows, k)).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], x.astype(np.float64) @ ref_w, rtol=1e-4,
                                   atol=1e-4 * np.sqrt(k))


@pytest.mark.parametrize("target", ["gpu", "gpu-dp4a"])
def test_weights_of_different_shapes_share_one_shader(tmp_path, target):
    """Two quantized products of different K and N in a row: their decode GEMVs (and dp4a's activation
    passes) run one shader each, the sizes being uniforms; the result is checked against numpy."""
    w1, w2 = rng.normal(size=(64, 40)).astype(np.float32), rng.normal(size=(40, 96)).astype(np.float32)
    proto = model_with([helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("MatMul", ["h", "w2"], ["y"])],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s", 64])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "s", 96])],
                       [onnx.numpy_helper.from_array(w1, "w1"), onnx.numpy_helper.from_array(w2, "w2")])
    sess = build_quantized(proto, "int8", tmp_path, target, dims={"b": 1, "s": 1})
    steps = sess.program.steps
    assert len(steps) == (4 if target == "gpu-dp4a" else 2)
    assert len({s.shader for s in steps}) == len(steps) // 2, [s.label for s in steps]
    x = rng.normal(size=(1, 1, 64)).astype(np.float32)
    want = x @ w1 @ w2
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=0.05, atol=0.05 * np.abs(want).max())


@pytest.mark.parametrize("target", ["software-q8", "gpu-dp4a"])
def test_gemvs_of_one_input_share_its_int8_pass(tmp_path, target):
    """Three int4 products of one x (as q/k/v projections are; the first with a residual Add fused in): x is
    quantized once for the three decode GEMVs (on int8 activations), each result equal to numpy's model of that
    arithmetic; a second x gets its own pass."""
    k, ns = 96, (40, 24, 8)
    ws = [rng.normal(size=(k, n)).astype(np.float32) for n in ns]
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["m0"]), helper.make_node("Add", ["m0", "res"], ["y0"])]
    nodes += [helper.make_node("MatMul", ["x", f"w{i}"], [f"y{i}"]) for i in (1, 2)]
    nodes += [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("MatMul", ["r", "w0"], ["y3"])]
    proto = model_with(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k]),
                               helper.make_tensor_value_info("res", TensorProto.FLOAT, [1, ns[0]])],
                       [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [1, n])
                        for i, n in enumerate(ns + ns[:1])],
                       [onnx.numpy_helper.from_array(w, f"w{i}") for i, w in enumerate(ws)])
    sess = build_quantized(proto, "int4", tmp_path, target)
    kinds = [s.label.split(":")[1] for s in sess.program.steps]
    assert kinds.count("FusedMatMulQ") == 2 and kinds.count("MatMulQ") == 4, kinds  # 4 GEMVs, 2 x passes
    x = rng.normal(size=(1, k)).astype(np.float32)
    res = rng.normal(size=(1, ns[0])).astype(np.float32)
    got = sess.run(None, {"x": x, "res": res})
    for i, w in enumerate(ws + ws[:1]):
        words, params = quantize_nk(w.T, "int4")
        xi = np.maximum(x, 0) if i == 3 else x
        want = dp4a_reference(xi.reshape(-1), unpack_reference(words, params, "int4", k).T, params, "int4")
        want = want + res.reshape(-1) if i == 0 else want
        np.testing.assert_allclose(got[i].reshape(-1), want, rtol=1e-4, atol=1e-4 * np.sqrt(k))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fmt", ["int8", "int4", "f16"])
def test_gemm_bias_alpha_and_transposed_weight(fmt, tmp_path, target):
    k, n = 64, 12
    w = rng.normal(size=(n, k)).astype(np.float32)
    c = rng.normal(size=(n,)).astype(np.float32)
    proto = model_with([helper.make_node("Gemm", ["x", "w", "c"], ["y"], transB=1, alpha=0.5, beta=2.0)],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["s", k])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["s", n])],
                       [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(c, "c")])
    sess = build_quantized(proto, fmt, tmp_path, target)
    ref_w = unpack_reference(*quantize_nk(w * np.float32(0.5), fmt), fmt, k)
    for rows in (1, 7):
        x = rng.normal(size=(rows, k)).astype(np.float32)
        y = sess.run(None, {"x": x})[0]
        np.testing.assert_allclose(y, x.astype(np.float64) @ ref_w.T + 2.0 * c, *tolerance(target, 1e-4, 1e-3))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fmt", [None, "int8", "int4", "f16"])
def test_tied_embedding_table_is_stored_once(fmt, tmp_path, target):
    """Gather(table) and MatMul(h, Transpose(table)) (a tied LM head) share one weight, any format."""
    v, d = 4096, 64  # 2**18 elements: large enough to quantize the Gather too
    table = rng.normal(size=(v, d)).astype(np.float32)
    nodes = [helper.make_node("Gather", ["table", "ids"], ["h"]),
             helper.make_node("Transpose", ["table"], ["tt"], perm=[1, 0]),
             helper.make_node("MatMul", ["h", "tt"], ["logits"])]
    proto = model_with(nodes, [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, "s"])],
                       [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "s", v])],
                       [onnx.numpy_helper.from_array(table, "table")])
    sess = build_quantized(proto, fmt, tmp_path, target)
    weight_bytes = sum(s["bytes"] for s in sess.artifact.manifest["shards"])
    assert weight_bytes < table.nbytes * {None: 1.01, "f16": 0.51}.get(fmt, 0.3)
    table_fmt = {None: None, "int8": "int8", "int4": "int8", "f16": "f16"}[fmt]  # tables stay int8 under int4
    ref = table.astype(np.float64) if fmt is None else unpack_reference(*quantize_nk(table, table_fmt), table_fmt, d)
    for ids in ([[5]], [[0, 4095, -1, 17, 17]]):
        ids = np.array(ids, np.int64)
        h = ref[ids % v]
        logits = sess.run(None, {"ids": ids})[0]
        np.testing.assert_allclose(logits, h @ ref.T, *tolerance(target, 1e-4, 1e-3))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("k,n", [(48, 20), (37, 9)])
def test_fp32_gemv_and_gemm(tmp_path, target, k, n):
    """MatMul with a plain f32 weight: the decode kernel (rows fixed at one) and the GEMM (symbolic rows)."""
    w = rng.normal(size=(k, n)).astype(np.float32)
    proto = model_with([helper.make_node("MatMul", ["x", "w"], ["y"])],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "s", k])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "s", n])],
                       [onnx.numpy_helper.from_array(w, "w")])
    families = set()
    for dims, rows in ((None, (1, 6)), ({"s": 1}, (1,))):
        out = str(tmp_path / f"f{bool(dims)}.wi")
        build(proto, out, target=target, dims=dims)
        sess = InferenceSession(out)
        (step,) = sess.program.steps
        families.add(step.label.split(":")[0])
        for s in rows:
            x = rng.normal(size=(1, s, k)).astype(np.float32)
            np.testing.assert_allclose(sess.run(None, {"x": x})[0], x.astype(np.float64) @ w, *tolerance(target, 1e-4, 1e-4))
    assert len(families) == 2  # a matrix-vector kernel for one row, a GEMM otherwise


def test_rewrite_leaves_activations_alone():
    """A MatMul of two activations is not a weight: nothing is rewritten."""
    proto = model_with([helper.make_node("MatMul", ["a", "b"], ["y"])],
                       [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 32]),
                        helper.make_tensor_value_info("b", TensorProto.FLOAT, [32, 3])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [])
    assert quantize_weights(ir.serde.deserialize_model(proto), "int4") == 0


def rms_norm_model(k: int, ns: tuple, rows, eps: float = 1e-5) -> tuple[onnx.ModelProto, dict]:
    """x -> RMSNorm (Llama's primitive spelling, scale g) -> two MatMuls, the first plus a residual r: as a
    decoder layer's norm feeds its projections. Returns the model and its weights."""
    ws = {"g": rng.uniform(0.5, 1.5, size=k).astype(np.float32),
          **{f"w{i}": rng.normal(size=(k, n)).astype(np.float32) for i, n in enumerate(ns)}}
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]),
             helper.make_node("ReduceMean", ["sq"], ["ms"], axes=[-1], keepdims=1),
             helper.make_node("Add", ["ms", "eps"], ["mse"]), helper.make_node("Sqrt", ["mse"], ["rms"]),
             helper.make_node("Reciprocal", ["rms"], ["inv"]), helper.make_node("Mul", ["x", "inv"], ["xn"]),
             helper.make_node("Mul", ["xn", "g"], ["h"]),
             helper.make_node("MatMul", ["h", "w0"], ["m0"]), helper.make_node("Add", ["m0", "r"], ["y0"]),
             helper.make_node("MatMul", ["h", "w1"], ["y1"])]
    inits = [onnx.numpy_helper.from_array(v, name) for name, v in ws.items()]
    inits.append(onnx.numpy_helper.from_array(np.array(eps, np.float32), "eps"))
    proto = model_with(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, k]),
                               helper.make_tensor_value_info("r", TensorProto.FLOAT, [rows, ns[0]])],
                       [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [rows, n]) for i, n in enumerate(ns)],
                       inits)
    return proto, ws


@pytest.mark.parametrize("target", ["software", "software-subgroups", "software-q8", "gpu", "gpu-subgroups",
                                    "gpu-dp4a"])
@pytest.mark.parametrize("fmt,k", [("int4", 96), ("int8", 96), ("int4", 70), ("int8", 600)])
def test_rms_norm_joins_the_matmuls_it_feeds(fmt, k, target, tmp_path):
    """graph/passes/absorb_norms.py: the norm is no node of its own; the decode GEMVs normalize x in their
    loads and stores (no norm kernel at all), the other kernels (GEMMs, int8-activation GEMVs) in one norm
    kernel shared by both products. Against numpy's norm and the unpacked weights, 1 row and 5."""
    ns = (40, 9)
    for rows in (1, 5):
        proto, ws = rms_norm_model(k, ns, rows)
        out = tmp_path / f"r{rows}.wi"
        build(proto, str(out), quantize=fmt, target=target)
        sess = InferenceSession(str(out))
        kinds = [s.label for s in sess.program.steps]
        norms = sum(label.startswith("reduce:") for label in kinds)
        prologue = rows == 1 and not KERNEL_CLASSES[target].int8_activations(fmt)
        assert norms == (0 if prologue else 1), kinds
        x = rng.normal(size=(rows, k)).astype(np.float32)
        r = rng.normal(size=(rows, ns[0])).astype(np.float32)
        x64 = x.astype(np.float64)
        h = x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-5) * ws["g"]
        got = sess.run(None, {"x": x, "r": r})
        for i in range(2):
            words, params = quantize_nk(ws[f"w{i}"].T, fmt)
            ref_w = unpack_reference(words, params, fmt, k).T
            if KERNEL_CLASSES[target].int8_activations(fmt) and rows == 1:
                want = dp4a_reference(h.reshape(-1).astype(np.float32), ref_w, params, fmt)[None]
            else:
                want = h @ ref_w
            want = want + r if i == 0 else want
            np.testing.assert_allclose(got[i], want, rtol=1e-4, atol=1e-4 * np.sqrt(k))


@pytest.mark.parametrize("reader", ["graph output", "relu"])
def test_rms_norm_read_elsewhere_stays_a_kernel(reader, tmp_path):
    """A norm whose result is also a graph output, or feeds a non-matmul op, keeps its own kernel: the matmuls
    read its output (and agree with numpy)."""
    k, ns = 64, (24, 8)
    proto, ws = rms_norm_model(k, ns, 1)
    if reader == "graph output":
        proto.graph.output.append(helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, k]))
    else:
        proto.graph.node.append(helper.make_node("Relu", ["h"], ["hr"]))
        proto.graph.output.append(helper.make_tensor_value_info("hr", TensorProto.FLOAT, [1, k]))
    build(proto, str(tmp_path), quantize="int4", target="software-subgroups")
    sess = InferenceSession(str(tmp_path))
    assert sum(s.label == "reduce:RMSNormalization" for s in sess.program.steps) == 1
    x = rng.normal(size=(1, k)).astype(np.float32)
    r = rng.normal(size=(1, ns[0])).astype(np.float32)
    x64 = x.astype(np.float64)
    h = x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-5) * ws["g"]
    got = sess.run(None, {"x": x, "r": r})
    np.testing.assert_allclose(got[2], h if reader == "graph output" else np.maximum(h, 0), rtol=1e-5, atol=1e-6)
    for i in range(2):
        words, params = quantize_nk(ws[f"w{i}"].T, "int4")
        want = h @ unpack_reference(words, params, "int4", k).T + (r if i == 0 else 0)
        np.testing.assert_allclose(got[i], want, rtol=1e-4, atol=1e-4 * np.sqrt(k))


@pytest.mark.parametrize("target,tiles", [("software", "balanced"), ("software", "startup"),
                                          ("software-subgroups", "balanced")])
@pytest.mark.parametrize("fmt", ["int8", "int4"])
def test_few_rows_kernel_beside_gemv_and_gemm(fmt, target, tiles, tmp_path):
    """Rows bounded (as a decoder's, a build for generation): one row takes the GEMV, 2..8 the few-rows kernel
    (each weight dequantized once for every row: a verification step), more the GEMM; partial column groups
    (N = 37) and a K tail (K = 80)."""
    from webinfer.codegen.kernels.quant_rows import FEW_ROWS

    k, n = 80, 37
    w = rng.normal(size=(k, n)).astype(np.float32)
    build(rows_matmul(w), str(tmp_path), quantize=fmt, target=target, tiles=tiles, dims={"s": (1, 40)})
    sess = InferenceSession(str(tmp_path))
    assert len(sess.program.steps) == 3, [s.label for s in sess.program.steps]
    words, params = quantize_nk(w.T, fmt)
    ref_w = unpack_reference(words, params, fmt, k).T
    for rows in (1, 2, 5, FEW_ROWS, FEW_ROWS + 1, 33):
        x = rng.normal(size=(rows, k)).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], x.astype(np.float64) @ ref_w, rtol=1e-4,
                                   atol=1e-4 * np.sqrt(k), err_msg=f"{rows} rows")
