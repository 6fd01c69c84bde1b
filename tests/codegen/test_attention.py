"""Attention (opset 23) and RotaryEmbedding against onnx.reference."""

import numpy as np
import pytest
from oprefs import TARGETS, check_node

rng = np.random.default_rng(0)


def f(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# software-subgroups' serial kernel shares K/V rows among the invocations of a subgroup on one head (head dims
# that are multiples of 32; a subgroup across two heads takes the plain loop): the tests with such dims run it too
WITH_SHARED = TARGETS + ("software-subgroups",)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("attrs", [{}, {"is_causal": 1}, {"scale": 0.1}, {"softcap": 2.0}])
@pytest.mark.parametrize("heads", [(3, 3), (6, 2)])
def test_attention_4d(attrs, heads, target):
    hq, hkv = heads
    _, _, _, gpu = check_node("Attention", {"q": f(2, hq, 4, 8), "k": f(2, hkv, 5, 8), "v": f(2, hkv, 5, 12)},
                              opset=23, target=target, **attrs)
    assert gpu


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("mask", [f(4, 5), f(2, 1, 4, 5), rng.random((2, 3, 4, 5)) > 0.3, f(4, 3)])
def test_attention_masks(mask, target):
    feeds = {"q": f(2, 3, 4, 8), "k": f(2, 3, 5, 8), "v": f(2, 3, 5, 8), "m": mask}
    check_node("Attention", feeds, opset=23, target=target)
    if mask.dtype != np.bool_:  # onnx.reference turns a bool mask with is_causal into NaNs (0 * -inf)
        check_node("Attention", feeds, opset=23, is_causal=1, rtol=1e-3, target=target)


@pytest.mark.parametrize("target", WITH_SHARED)
@pytest.mark.parametrize("d", [8, 32])
def test_attention_lowest_float_mask(target, d):
    """Exports mask with float32's lowest rather than -inf. Rows see a causal prefix of 40 keys (the kernels
    skip the keys, or the gpu classes' key tiles, past the furthest one a workgroup's rows see); row 5 sees no
    key at all: its softmax is uniform over every key, not empty; row 6 sees key 0 alone."""
    low = np.finfo(np.float32).min
    mask = np.zeros((8, 40), np.float32)
    for i in range(8):
        mask[i, i + 1:] = low
    mask[5] = low
    mask[6, 1:] = low
    feeds = {"q": f(1, 2, 8, d), "k": f(1, 2, 40, d), "v": f(1, 2, 40, d), "m": mask}
    check_node("Attention", feeds, opset=23, target=target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dv", [8, 5])
def test_attention_3d_gqa_with_past_and_present(target, dv):
    feeds = {"q": f(2, 4, 6 * 8), "k": f(2, 4, 2 * 8), "v": f(2, 4, 2 * dv), "m": f(4, 7), "pk": f(2, 2, 3, 8),
             "pv": f(2, 2, 3, dv)}
    check_node("Attention", feeds, n_outputs=3, opset=23, q_num_heads=6, kv_num_heads=2, target=target)


@pytest.mark.parametrize("target", WITH_SHARED)
@pytest.mark.parametrize("d", [16, 64, 128])
def test_attention_long_sequences(target, d):
    """More query rows than a workgroup holds (70 > 64) and keys over many tiles (130), causal with a past
    and a float mask, softcap: the gpu class's flash kernel streams K/V tiles with an online softmax."""
    feeds = {"q": f(1, 4, 70, d), "k": f(1, 2, 70, d), "v": f(1, 2, 70, d), "m": f(70, 130) * 3,
             "pk": f(1, 2, 60, d), "pv": f(1, 2, 60, d)}
    check_node("Attention", feeds, n_outputs=3, opset=23, is_causal=1, softcap=3.0, rtol=1e-4, atol=1e-4,
               target=target)


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_attention_qk_output_modes(mode):
    feeds = {"q": f(1, 2, 3, 4), "k": f(1, 2, 5, 4), "v": f(1, 2, 5, 4), "m": f(3, 5)}
    check_node("Attention", feeds, n_outputs=4, opset=23, qk_matmul_output_mode=mode, softcap=1.5)


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rot", [0, 4])
def test_rotary(interleaved, rot):
    half = (rot or 8) // 2
    pos = rng.integers(0, 20, size=(2, 3)).astype(np.int64)
    _, _, _, gpu = check_node("RotaryEmbedding", {"x": f(2, 4, 3, 8), "c": f(20, half), "s": f(20, half), "p": pos},
                              opset=23, interleaved=interleaved, rotary_embedding_dim=rot)
    assert gpu
    check_node("RotaryEmbedding", {"x": f(2, 3, 16), "c": f(2, 3, half), "s": f(2, 3, half)}, opset=23,
               num_heads=2, interleaved=interleaved, rotary_embedding_dim=rot)
