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
from trig_cases import check_trig, trig_inputs, trig_model

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
