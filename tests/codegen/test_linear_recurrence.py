"""LinearAttention (every update rule, GQA/MQA, per-head and per-dim decay, past state) and CausalConvWithState
against onnx.reference."""

import numpy as np
import pytest
from onnx import helper
from oprefs import check_model, make_model

rng = np.random.default_rng(0)


def _f32(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
@pytest.mark.parametrize("hq,hkv,past,per_dim", [(4, 4, False, False), (6, 2, True, True), (4, 1, True, False)])
def test_linear_attention(rule, hq, hkv, past, per_dim):
    b, t, dk, dv = 2, 5, 8, 6
    feeds = {"q": _f32(b, t, hq * dk), "k": _f32(b, t, hkv * dk, scale=0.3), "v": _f32(b, t, hkv * dv)}
    names = ["q", "k", "v", ""]
    if past:
        feeds["past"] = _f32(b, hkv, dk, dv)
        names[3] = "past"
    if rule in ("gated", "gated_delta"):
        feeds["decay"] = -np.abs(_f32(b, t, hkv * dk if per_dim else hkv))
        names.append("decay")
    elif rule == "delta":
        names.append("")
    if rule in ("delta", "gated_delta"):
        feeds["beta"] = rng.random((b, t, 1 if per_dim else hkv)).astype(np.float32)
        names.append("beta")
    node = helper.make_node("LinearAttention", names, ["y", "state"], q_num_heads=hq, kv_num_heads=hkv,
                            update_rule=rule)
    _, _, _, gpu = check_model(make_model([node], feeds, ["y", "state"], opset=27), feeds)
    assert gpu


def test_linear_attention_scale_and_output_only():
    feeds = {"q": _f32(1, 3, 8), "k": _f32(1, 3, 8), "v": _f32(1, 3, 4)}
    node = helper.make_node("LinearAttention", ["q", "k", "v"], ["y"], q_num_heads=2, kv_num_heads=2,
                            update_rule="linear", scale=0.3)
    check_model(make_model([node], feeds, ["y"], opset=27), feeds)


@pytest.mark.parametrize("k,past,bias,act", [(4, False, False, "none"), (3, True, True, "silu"), (1, False, True, "swish"),
                                             (5, True, False, "none")])
@pytest.mark.parametrize("length", [1, 7])
def test_causal_conv_with_state(k, past, bias, act, length):
    b, c = 2, 3
    feeds = {"x": _f32(b, c, length), "w": _f32(c, 1, k)}
    names = ["x", "w", "", ""]
    if bias:
        feeds["bias"] = _f32(c)
        names[2] = "bias"
    if past:
        feeds["past"] = _f32(b, c, k - 1)
        names[3] = "past"
    node = helper.make_node("CausalConvWithState", names, ["y", "state"], activation=act)
    outs = ["y", "state"] if k > 1 else ["y"]
    _, _, _, gpu = check_model(make_model([node], feeds, outs, opset=27), feeds)
    assert gpu
