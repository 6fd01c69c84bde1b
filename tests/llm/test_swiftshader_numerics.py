"""Numerics that must not depend on the driver's built-in functions. WGSL lets sin/cos be approximate (absolute
error 2^-11); SwiftShader's (the page's driver here) are 1.9e-4 off where lavapipe's are within 1.4 ulp, which
moved a decoder's rotary tables enough to flip the 1 B int4 page's near-tie first greedy id (docs/notes.md).
Run natively on both drivers (SwiftShader through tests/swiftshader_run.py): Sin/Cos/Tan against numpy's
float64 within a few ulp, and a tiny Llama's prefill logits at positions up to 300 against onnxruntime."""

from __future__ import annotations

import json
import random

import numpy as np
import onnxruntime as ort
import pytest
import swiftshader_run
from onnx import TensorProto, helper

import webinfer
from webinfer.runtime.inference import InferenceSession

DRIVERS = ["lavapipe", pytest.param("swiftshader", marks=pytest.mark.skipif(
    not swiftshader_run.available(), reason="Chromium's SwiftShader Vulkan driver is not installed"))]


def _run(driver: str, art: str, feeds: dict, tmp_path) -> dict:
    if driver == "lavapipe":
        session = InferenceSession(art)
        return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    np.savez(tmp_path / "feeds.npz", **feeds)
    swiftshader_run.run("session", art, str(tmp_path / "feeds.npz"), str(tmp_path / "out.npz"))
    return dict(np.load(tmp_path / "out.npz"))


def trig_model():
    nodes = [helper.make_node(op, ["x"], [op.lower()]) for op in ("Sin", "Cos", "Tan")]
    g = helper.make_graph(nodes, "trig", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, ["n"]) for o in ("sin", "cos", "tan")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def trig_inputs() -> np.ndarray:
    """Angles from a rotary table's range (position x frequency, up to 4096) and beyond, exact quarter turns'
    neighbours, and the special values."""
    rng = np.random.default_rng(0)
    parts = [rng.uniform(-lim, lim, 4096) for lim in (3.2, 40.0, 4096.0, 65536.0)]
    quarter = np.float32(np.pi / 2) * np.arange(-40, 41, dtype=np.float32)
    parts += [quarter, np.nextafter(quarter, np.float32(np.inf)), [0.0, -0.0, 1e-30, -1e-8]]
    return np.concatenate(parts).astype(np.float32)


def check_trig(x: np.ndarray, outs: dict) -> None:
    """Within 3 ulp of the float64 result (an absolute floor of 2 ulp of 1 where it crosses zero), and tan
    within 4e-7 relative; ±0 keeps its sign through sin and tan."""
    x64 = x.astype(np.float64)
    for name, ref in (("sin", np.sin), ("cos", np.cos)):
        want, got = ref(x64), outs[name].astype(np.float64)
        err = np.abs(got - want)
        bound = 3 * np.spacing(np.abs(want).astype(np.float32)).astype(np.float64) + 2.4e-7
        worst = int(np.argmax(err - bound))
        assert (err <= bound).all(), f"{name}({x[worst]!r}) = {got[worst]!r}, want {want[worst]!r}"
    want, got = np.tan(x64), outs["tan"].astype(np.float64)
    rel = np.abs(got - want) / np.maximum(np.abs(want), 1e-30)
    worst = int(np.argmax(rel))
    assert rel[worst] <= 4e-7, f"tan({x[worst]!r}) = {got[worst]!r}, want {want[worst]!r}"
    zeros = x == 0
    assert (np.signbit(outs["sin"][zeros]) == np.signbit(x[zeros])).all()
    assert (np.signbit(outs["tan"][zeros]) == np.signbit(x[zeros])).all()


@pytest.mark.parametrize("driver", DRIVERS)
def test_sin_cos_tan_within_a_few_ulp(driver, tmp_path):
    art = str(tmp_path / "trig.wi")
    webinfer.build(trig_model(), art)
    x = trig_inputs()
    check_trig(x, _run(driver, art, {"x": x}, tmp_path))
    special = np.array([np.nan, np.inf, -np.inf], np.float32)
    outs = _run(driver, art, {"x": special}, tmp_path)
    assert all(np.isnan(outs[k]).all() for k in ("sin", "cos", "tan"))


@pytest.mark.parametrize("driver", DRIVERS)
def test_rotary_decoder_logits_equal_onnxruntime(driver, tiny_llama_dir, tmp_path):
    """A prefill of 300 ids (rotary angles up to 299 rad): the last position's logits within 2e-5 of the peak
    logit of onnxruntime's (SwiftShader with the built-in sin/cos: 5.5e-4; now 2.4e-6, as lavapipe)."""
    n, model = 300, tiny_llama_dir / "model.onnx"
    rng = random.Random(1)
    ids = [rng.randrange(3, 512) for _ in range(n)]
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    past = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32)
            for i in sess.get_inputs() if i.name.startswith("past_key_values.")}
    want = sess.run(["logits"], {"input_ids": np.array([ids]), "attention_mask": np.ones((1, n), np.int64),
                                 "position_ids": np.arange(n)[None], **past})[0][0, -1]
    art = str(tmp_path / "tiny.wi")
    webinfer.build(str(model), art, max_seq=n + 8, target="software")
    (tmp_path / "ids.json").write_text(json.dumps(ids))
    if driver == "lavapipe":
        swiftshader_run._prefill(art, str(tmp_path / "ids.json"), str(tmp_path / "logits.npy"))
    else:
        swiftshader_run.run("prefill", art, str(tmp_path / "ids.json"), str(tmp_path / "logits.npy"))
    got = np.load(tmp_path / "logits.npy")[-want.size:]
    assert np.abs(got - want).max() <= 2e-5 * np.abs(want).max()
    assert got.argmax() == want.argmax()
