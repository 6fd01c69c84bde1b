"""The rules that join work to a matmul's kernel (fuse_epilogue, pair_matmuls, absorb_norms), each alone on
the graph the pipeline hands it, then built as is and run against onnx.reference on the original graph (its
weights rounded to the quantized grid where the test packs them, so only float error remains)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as h
from fusion_util import model, randn
from rule_util import check_rule_built

from webinfer.graph.passes.absorb_norms import ABSORB_NORM
from webinfer.graph.passes.fuse_epilogue import EPILOGUE, OWN_EPILOGUE
from webinfer.graph.passes.pair_matmuls import PAIR_MATMULS

K, N = 64, 32


def _q8_0(w: np.ndarray) -> np.ndarray:
    """w [K, N] rounded as symmetric 8-bit blocks of 32 along K, per column (the int8 format's grid)."""
    blocks = w.T.reshape(w.shape[1], -1, 32)
    scale = np.abs(blocks).max(axis=2, keepdims=True) / 127
    return (np.rint(blocks / scale) * scale).reshape(w.shape[1], -1).T.astype(np.float32)


def _mm_then(second, extra: dict, w=None):
    """x @ W, then ``second`` (a node reading "m")."""
    feeds = {"x": randn(3, K)}
    inits = {"w": randn(K, N) * 0.2 if w is None else w, **extra}
    return model([h.make_node("MatMul", ["x", "w"], ["m"]), second], feeds, ["out"], inits), feeds


def test_epilogue_joins_an_activation_to_the_matmul():
    p, feeds = _mm_then(h.make_node("Relu", ["m"], ["out"]), {})
    assert check_rule_built(p, EPILOGUE, "fuse_epilogue", feeds, fires=True) == ["FusedMatMul"]


def test_epilogue_condition_refuses_a_result_broadcast_to_a_bigger_shape():
    feeds = {"x": randn(3, K), "y": randn(2, 3, N)}
    p = model([h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Add", ["m", "y"], ["out"])], feeds, ["out"],
              {"w": randn(K, N) * 0.2})
    assert check_rule_built(p, EPILOGUE, "fuse_epilogue", feeds, fires=False) == ["MatMul", "Add"]


def _rounded(p: onnx.ModelProto) -> onnx.ModelProto:
    q = onnx.ModelProto()
    q.CopyFrom(p)
    for t in q.graph.initializer:
        a = onnx.numpy_helper.to_array(t)
        if a.ndim == 2 and a.shape[0] % 32 == 0:
            t.CopyFrom(onnx.numpy_helper.from_array(_q8_0(a), t.name))
    return q


def test_own_epilogue_joins_an_activation_to_a_packed_matmul():
    p, feeds = _mm_then(h.make_node("Sigmoid", ["m"], ["out"]), {})
    ops = check_rule_built(p, OWN_EPILOGUE, "fuse_epilogue", feeds, True, "int8", _rounded(p))
    assert ops == ["FusedMatMulQ"]


def test_own_epilogue_condition_refuses_a_result_broadcast_to_a_bigger_shape():
    feeds = {"x": randn(3, K), "y": randn(2, 3, N)}
    p = model([h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Add", ["m", "y"], ["out"])], feeds, ["out"],
              {"w": randn(K, N) * 0.2})
    assert check_rule_built(p, OWN_EPILOGUE, "fuse_epilogue", feeds, False, "int8", _rounded(p)) == ["MatMulQ", "Add"]


def _gated_mlp(norm_out: bool = False):
    """RMSNorm(x) -> silu(h @ Wg) * (h @ Wu)."""
    feeds = {"x": randn(2, K)}
    nodes = [h.make_node("Pow", ["x", "two"], ["sq"]), h.make_node("ReduceMean", ["sq", "axes"], ["ms"], keepdims=1),
             h.make_node("Add", ["ms", "eps"], ["mse"]), h.make_node("Sqrt", ["mse"], ["rms"]),
             h.make_node("Reciprocal", ["rms"], ["inv"]), h.make_node("Mul", ["x", "inv"], ["xn"]),
             h.make_node("Mul", ["xn", "gamma"], ["hn"]),
             h.make_node("MatMul", ["hn", "wg"], ["g"]), h.make_node("MatMul", ["hn", "wu"], ["u"]),
             h.make_node("Sigmoid", ["g"], ["sg"]), h.make_node("Mul", ["g", "sg"], ["act"]),
             h.make_node("Mul", ["act", "u"], ["out"])]
    inits = {"two": np.float32(2), "axes": np.array([-1], np.int64), "eps": np.float32(1e-6),
             "gamma": (np.abs(randn(K)) + 0.5), "wg": randn(K, N) * 0.2, "wu": randn(K, N) * 0.2}
    return model(nodes, feeds, ["out", "hn"] if norm_out else ["out"], inits, opset=20), feeds


def test_pair_matmuls_fires_on_a_gated_mlp():
    p, feeds = _gated_mlp()
    ops = check_rule_built(p, PAIR_MATMULS, "pair_matmuls", feeds, True, "int8", _rounded(p))
    assert ops == ["RMSNormalization", "PairedMatMulQ"]


def test_pair_matmuls_condition_refuses_float16_weights():
    p, feeds = _gated_mlp()
    ops = check_rule_built(p, PAIR_MATMULS, "pair_matmuls", feeds, False, "f16", p, rtol=1e-2, atol=1e-2)
    assert "PairedMatMulQ" not in ops


def test_absorb_norm_joins_the_norm_to_the_matmuls_that_read_it():
    p, feeds = _gated_mlp()
    ops = check_rule_built(p, ABSORB_NORM, "absorb_norms", feeds, True, "int8", _rounded(p))
    assert ops == ["PairedMatMulQ"]


def test_absorb_norm_condition_refuses_a_norm_that_is_also_an_output():
    p, feeds = _gated_mlp(norm_out=True)
    ops = check_rule_built(p, ABSORB_NORM, "absorb_norms", feeds, False, "int8", _rounded(p))
    assert ops[0] == "RMSNormalization"
