"""MatMul, Gemm (and the integer matmuls) against onnx.reference on random and edge shapes."""

import numpy as np
import pytest
from oprefs import TARGETS, check_node

rng = np.random.default_rng(1)


def f32(shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


# The matmul kernels use subgroups only in software-subgroups (A rows broadcast): test_matmul_classes and the
# integer tests below run them under every other class
MATMUL_TARGETS = ("software", "software-subgroups", "gpu", "gpu-f16")
MATMUL_SHAPES = [
    ((3, 4), (4, 5)), ((1, 1), (1, 1)), ((7, 13), (13, 9)), ((2, 5, 6), (6, 3)), ((6,), (6, 7)), ((5, 6), (6,)),
    ((6,), (6,)), ((2, 1, 3, 4), (5, 4, 2)), ((1, 3, 4), (2, 4, 5)), ((3, 17, 33), (3, 33, 10)),
    ((4, 1, 2, 8), (4, 8, 3)), ((2, 3, 1, 5), (1, 5, 1)), ((65, 70), (70, 67)),
    # K and N multiples of 4 (the vec4 path), with and without edge tiles
    ((5, 8), (8, 12)), ((2, 3, 16), (2, 16, 8)), ((9, 12), (12, 20)), ((3, 1, 7, 4), (2, 4, 36)), ((70, 64), (64, 68)),
    ((64, 32), (32, 64)), ((2, 16, 8), (8, 16)),
]


@pytest.mark.parametrize("target", MATMUL_TARGETS)
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul(sa, sb, target):
    _, _, _, gpu = check_node("MatMul", {"a": f32(sa), "b": f32(sb)}, target=target)
    assert gpu


@pytest.mark.parametrize("target", MATMUL_TARGETS)
def test_matmul_constant_weight(target):
    check_node("MatMul", {"a": f32((2, 3, 10))}, initializers={"w": f32((10, 6))}, target=target)


@pytest.mark.parametrize("target", MATMUL_TARGETS)
@pytest.mark.parametrize("ta", [0, 1])
@pytest.mark.parametrize("tb", [0, 1])
@pytest.mark.parametrize("cshape", [None, (5,), (1, 5), (3, 1), (3, 5), ()])
def test_gemm(ta, tb, cshape, target):
    m, k, n = 3, 7, 5
    feeds = {"a": f32((k, m) if ta else (m, k)), "b": f32((n, k) if tb else (k, n))}
    if cshape is not None:
        feeds["c"] = f32(cshape)
    check_node("Gemm", feeds, transA=ta, transB=tb, alpha=0.7, beta=1.3, target=target)


def test_gemm_constant_weight_transposed():
    check_node("Gemm", {"a": f32((9, 20))}, initializers={"w": f32((11, 20)), "c": f32((11,))}, transB=1)
    check_node("Gemm", {"a": f32((1, 6))}, initializers={"w": f32((6, 4))})


@pytest.mark.parametrize("target", ["software", "software-subgroups"])
@pytest.mark.parametrize("tiles", ["startup", "throughput"])
@pytest.mark.parametrize("sa,sb", [((70, 64), (64, 68)), ((2, 3, 16), (2, 16, 8)), ((3, 1, 7, 4), (2, 4, 36)),
                                   ((33, 20), (20, 12)), ((2, 40, 32), (2, 32, 136))])
def test_matmul_tile_policies(tiles, sa, sb, target):
    """The software classes' quick-to-compile tile (startup) and big register tile (throughput). Under
    software-subgroups the throughput tile's 16 rows come 2 per lane from 8 lanes, and a product whose
    workgroup is narrower than a subgroup (8 x 4 invocations made 4 x 8) takes the plain loop."""
    from webinfer.options import BuildOptions

    own = np.random.default_rng(7)  # (the module's rng sequence stays as the other tests expect it)
    a, b = (own.uniform(-1, 1, size=s).astype(np.float32) for s in (sa, sb))
    check_node("MatMul", {"a": a, "b": b}, target=BuildOptions(target=target, tiles=tiles))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("sa,sb", [((65, 70), (70, 67)), ((2, 3, 17), (2, 17, 5)), ((1, 33), (33, 1))])
def test_matmul_classes(target, sa, sb):
    check_node("MatMul", {"a": f32(sa), "b": f32(sb)}, target=target)
    check_node("Gemm", {"a": f32((sa[-1], 9))}, initializers={"w": f32((10, sa[-1]))}, transA=1, transB=1,
               target=target)
    check_node("MatMulInteger", {"a": q(sa, np.int8), "b": q(sb, np.int8)}, target=target)  # the scalar tiling


def test_matmul_symbolic_dims(tmp_path):
    """Built once with symbolic batch/seq, run at two sequence lengths, compared with numpy."""
    import onnx
    from onnx import helper

    from webinfer import InferenceSession
    from webinfer.build import build

    w = f32((64, 32))
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "sym",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", "seq", 64])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", "seq", 32])],
        [onnx.numpy_helper.from_array(w, "w")])
    build(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), str(tmp_path))
    sess = InferenceSession(str(tmp_path))
    for batch, seq in [(2, 5), (1, 37)]:
        x = f32((batch, seq, 64))
        (y,) = sess.run(None, {"x": x})
        np.testing.assert_allclose(y, x @ w, rtol=1e-4, atol=1e-5)


def q(shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, size=shape).astype(dtype)


@pytest.mark.parametrize("target", MATMUL_TARGETS)
@pytest.mark.parametrize("dt", [np.uint8, np.int8])
@pytest.mark.parametrize("sa,sb", [((4, 7), (7, 5)), ((2, 3, 9), (9, 4)), ((2, 3, 5), (2, 5, 6)), ((7,), (7, 3)),
                                   ((40, 37), (37, 36))])
def test_matmul_integer(dt, sa, sb, target):
    check_node("MatMulInteger", {"a": q(sa, dt), "b": q(sb, dt)}, target=target)
    check_node("MatMulInteger", {"a": q(sa, dt), "b": q(sb, dt), "az": q((), dt), "bz": q((), dt)}, target=target)


@pytest.mark.parametrize("target", TARGETS)
def test_matmul_integer_per_line_zero_points(target):
    a, b = q((2, 4, 6), np.uint8), q((6, 5), np.int8)
    check_node("MatMulInteger", {"a": a, "b": b, "az": q((4, 1), np.uint8), "bz": q((5,), np.int8)}, target=target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dt", [np.uint8, np.int8])
@pytest.mark.parametrize("per_line", [False, True])
def test_qlinear_matmul(dt, per_line, target):
    m, k, n = 5, 8, 6
    feeds = {"a": q((2, m, k), dt), "a_scale": np.float32(0.02), "a_zero": q((), dt), "b": q((k, n), dt),
             "b_scale": np.float32(0.03), "b_zero": q((), dt), "y_scale": np.float32(0.9), "y_zero": q((), dt)}
    if per_line:
        feeds["a_scale"] = rng.uniform(0.01, 0.03, size=(m, 1)).astype(np.float32)
        feeds["b_scale"] = rng.uniform(0.01, 0.03, size=(n,)).astype(np.float32)
        feeds["b_zero"] = q((n,), dt)
    check_node("QLinearMatMul", feeds, opset=21, target=target)
    inits = {k_: feeds.pop(k_) for k_ in list(feeds) if k_ != "a"}
    check_node("QLinearMatMul", feeds, initializers=inits, opset=21, target=target)


def test_vec4_path_is_used(tmp_path):
    import json

    from onnx import helper
    from oprefs import make_model

    from webinfer.build import build

    feeds = {"a": f32((9, 12)), "b": f32((12, 20))}
    build(make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], feeds, ["y"]), str(tmp_path))
    shaders = [p.read_text() for p in (tmp_path / "shaders").glob("*.wgsl")]
    assert any("array<vec4<f32>>" in s for s in shaders), json.dumps([s[:200] for s in shaders])


def test_qlinear_matmul_rounds_the_exact_product():
    """250 * (0 - 213) * (0.02 * 0.03 / 0.9) is -35.4999996 exactly but -35.5 in f32: must round to -35."""
    u8 = lambda v: np.array(v, np.uint8)  # noqa: E731
    feeds = {"a": u8([[250, 3]]), "a_scale": np.float32(0.02), "a_zero": u8(0), "b": u8([[0], [213]]),
             "b_scale": np.float32(0.03), "b_zero": u8(213), "y_scale": np.float32(0.9), "y_zero": u8(45)}
    ref, _, _, _ = check_node("QLinearMatMul", feeds, opset=21)
    assert ref[0][0, 0] == 10
