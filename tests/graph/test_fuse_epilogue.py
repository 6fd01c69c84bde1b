"""fuse_epilogue: bias, activations and residual Adds after MatMul / Gemm / Conv run inside the matmul or
conv kernel. Outputs are checked against ReferenceEvaluator on the original graph."""

from __future__ import annotations

import numpy as np
import onnx.helper as h
import pytest
from fusion_util import after_pass, model, randn, run_checked

FUSIONS = ("fuse_elementwise", "fuse_epilogue")


@pytest.mark.parametrize("target", ["software", "gpu"])
def test_matmul_bias_relu_residual_is_one_kernel(target):
    nodes = [h.make_node("MatMul", ["x", "w"], ["a"]), h.make_node("Add", ["bias", "a"], ["b"]),
             h.make_node("Relu", ["b"], ["c"]), h.make_node("Add", ["c", "r"], ["out"])]
    feeds = {"x": randn(2, 5, 8), "r": randn(2, 5, 12)}
    p = model(nodes, feeds, ["out"], {"w": randn(8, 12), "bias": randn(12)})
    assert after_pass(p, *FUSIONS) == ["FusedMatMul"]
    assert run_checked(p, feeds, target=target) == {"FusedMatMul": 1}


@pytest.mark.parametrize("target", ["software", "gpu"])
def test_gemm_with_c_and_hard_sigmoid(target):
    nodes = [h.make_node("Gemm", ["x", "w", "c"], ["a"], transB=1, alpha=0.5),
             h.make_node("HardSigmoid", ["a"], ["out"], alpha=0.3, beta=0.4)]
    feeds = {"x": randn(3, 6)}
    p = model(nodes, feeds, ["out"], {"w": randn(5, 6), "c": randn(5)})
    assert run_checked(p, feeds, target=target) == {"FusedGemm": 1}


@pytest.mark.parametrize("target", ["software", "gpu"])
def test_conv_bias_hardswish_and_clip_epilogues(target):
    nodes = [h.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]), h.make_node("Add", ["a", "b1"], ["b"]),
             h.make_node("HardSwish", ["b"], ["c"]),
             h.make_node("Conv", ["c", "w2", "b2"], ["d"]), h.make_node("Clip", ["d", "lo", "hi"], ["out"])]
    feeds = {"x": randn(2, 3, 9, 7)}
    inits = {"w1": randn(8, 3, 3, 3), "b1": randn(1, 8, 1, 1), "w2": randn(4, 8, 1, 1), "b2": randn(4),
             "lo": np.float32(-0.5), "hi": np.float32(0.7)}
    p = model(nodes, feeds, ["out"], inits)
    assert after_pass(p, *FUSIONS) == ["FusedConv", "FusedConv"]
    assert run_checked(p, feeds, target=target) == {"FusedConv": 2}


def test_extra_input_the_kernel_cannot_index_falls_back_to_two_kernels():
    nodes = [h.make_node("MatMul", ["x", "w"], ["a"]), h.make_node("Mul", ["a", "g"], ["out"])]
    feeds = {"x": randn(2, 5, 8), "g": randn(2, 1, 12)}  # per (batch, column): not a single axis
    p = model(nodes, feeds, ["out"], {"w": randn(8, 12)})
    assert after_pass(p, *FUSIONS) == ["FusedMatMul"]
    assert run_checked(p, feeds) == {"FusedMatMul": 2}


def test_not_fused_when_output_is_reused_or_broadcast_bigger():
    nodes = [h.make_node("MatMul", ["x", "w"], ["a"]), h.make_node("Relu", ["a"], ["y"]),
             h.make_node("Conv", ["z", "k"], ["c"]), h.make_node("Mul", ["big", "c"], ["gated"])]
    feeds = {"x": randn(4, 8), "z": randn(1, 6, 1, 1), "big": randn(1, 6, 5, 5)}
    p = model(nodes, feeds, ["a", "y", "gated"], {"w": randn(8, 3), "k": randn(6, 6, 1, 1)})
    assert after_pass(p, *FUSIONS) == ["MatMul", "Relu", "Conv", "Mul"]
    run_checked(p, feeds)


@pytest.mark.parametrize("target", ["software", "gpu"])
def test_resize_takes_per_channel_per_column_and_residual_epilogues(target):
    """An FPN-style upsample + lateral Add, a per-channel scale and a per-column bias run in the resize's store."""
    nodes = [h.make_node("Resize", ["x", "", "scales"], ["up"], mode="linear"),
             h.make_node("Mul", ["up", "g"], ["a"]), h.make_node("Add", ["a", "lateral"], ["b"]),
             h.make_node("Add", ["b", "colbias"], ["c"]), h.make_node("Relu", ["c"], ["out"])]
    feeds = {"x": randn(1, 3, 4, 5), "lateral": randn(1, 3, 8, 10)}
    inits = {"scales": np.array([1, 1, 2, 2], np.float32), "g": randn(1, 3, 1, 1), "colbias": randn(10)}
    p = model(nodes, feeds, ["out"], inits)
    assert after_pass(p, *FUSIONS) == ["FusedResize"]
    assert run_checked(p, feeds, target=target) == {"FusedResize": 1}


def test_resize_that_resizes_nothing_runs_its_epilogue_alone():
    nodes = [h.make_node("Resize", ["x", "", "scales"], ["up"]), h.make_node("Sigmoid", ["up"], ["out"])]
    feeds = {"x": randn(2, 3, 4)}
    p = model(nodes, feeds, ["out"], {"scales": np.ones(3, np.float32)})
    assert after_pass(p, *FUSIONS) == ["FusedResize"]
    assert run_checked(p, feeds) == {"FusedResize": 1}


@pytest.mark.parametrize("target", ["software", "gpu", "gpu-subgroups"])
def test_post_norm_residual_add_runs_in_the_layer_norm_kernel(target):
    nodes = [h.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=-1, epsilon=1e-5),
             h.make_node("Add", ["res", "n"], ["a"]), h.make_node("Mul", ["a", "col"], ["out"])]
    feeds = {"x": randn(2, 5, 16), "res": randn(2, 5, 16)}
    p = model(nodes, feeds, ["out"], {"g": randn(16), "b": randn(16), "col": randn(16)})
    assert after_pass(p, *FUSIONS) == ["FusedLayerNormalization"]
    assert run_checked(p, feeds, target=target) == {"FusedLayerNormalization": 1}


@pytest.mark.parametrize("target", ["software", "gpu"])
def test_primitive_rms_norm_then_residual_is_one_kernel(target):
    """Gemma's post-norm: an RMS norm spelled in primitives (fuse_norms), scaled, then the residual and a scalar."""
    nodes = [h.make_node("Mul", ["x", "x"], ["sq"]), h.make_node("ReduceMean", ["sq", "axes"], ["ms"]),
             h.make_node("Add", ["ms", "eps"], ["mse"]), h.make_node("Sqrt", ["mse"], ["rms"]),
             h.make_node("Div", ["x", "rms"], ["xn"]), h.make_node("Mul", ["xn", "w"], ["n"]),
             h.make_node("Add", ["n", "res"], ["a"]), h.make_node("Mul", ["a", "half"], ["out"])]
    feeds = {"x": randn(1, 7, 32), "res": randn(1, 7, 32)}
    inits = {"axes": np.array([-1], np.int64), "eps": np.float32(1e-6), "w": randn(32), "half": np.float32(0.5)}
    p = model(nodes, feeds, ["out"], inits)
    assert run_checked(p, feeds, target=target) == {"FusedRMSNormalization": 1}


def test_layer_norm_whose_statistics_are_read_keeps_its_add():
    nodes = [h.make_node("LayerNormalization", ["x", "g"], ["n", "mean"], axis=-1),
             h.make_node("Add", ["n", "res"], ["out"])]
    feeds = {"x": randn(3, 8), "res": randn(3, 8)}
    p = model(nodes, feeds, ["out", "mean"], {"g": randn(8)})
    assert after_pass(p, *FUSIONS) == ["LayerNormalization", "Add"]
    run_checked(p, feeds)


def test_norm_epilogue_it_cannot_index_falls_back_to_two_kernels():
    nodes = [h.make_node("LayerNormalization", ["x", "g"], ["n"], axis=-1), h.make_node("Mul", ["n", "gate"], ["out"])]
    feeds = {"x": randn(2, 5, 8), "gate": randn(2, 1, 8)}  # per (batch, element of the row): not x's nor a row's
    p = model(nodes, feeds, ["out"], {"g": randn(8)})
    assert after_pass(p, *FUSIONS) == ["FusedLayerNormalization"]
    assert run_checked(p, feeds) == {"FusedLayerNormalization": 2}
