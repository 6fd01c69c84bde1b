"""The audio prologue in Chromium: a tiny Whisper-style encoder built from an export folder (the prologue added from
its preprocessor_config.json) runs in the page through webinfer.mjs on espeak-ng speech at 22.05 kHz, fed as a
Float32Array with its sample rate; the logits equal native webinfer's and onnxruntime's on transformers' features."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import onnxruntime as ort
import pytest
from scipy.io import wavfile

pytestmark = pytest.mark.browser


def test_whisper_prologue_in_the_page(page, tmp_path, webinfer_wheel):
    from audio_models import tiny_encoder_export, whisper_reference

    import webinfer
    from webinfer.bundle import bundle
    from webinfer.runtime.inference import InferenceSession
    from webinfer.serve import serve_in_thread

    if not shutil.which("espeak-ng"):
        pytest.fail("espeak-ng is missing: scripts/setup.sh installs it")
    wav = tmp_path / "speech.wav"
    subprocess.run(["espeak-ng", "-w", str(wav), "Speech to text runs in the page."], check=True)
    rate, data = wavfile.read(wav)
    pcm = data.astype(np.float32) / 32768
    model = tiny_encoder_export(tmp_path / "export")
    art = tmp_path / "enc.wi"
    webinfer.build(str(tmp_path / "export" / "encoder_model.onnx"), str(art))
    site = tmp_path / "site"
    bundle(str(art), str(site), wheel=webinfer_wheel)
    (site / "audio.html").write_text("<!doctype html><title>audio</title>")
    server, url = serve_in_thread(str(site))
    try:
        page.goto(url + "audio.html")
        got = page.evaluate("""async ([pcm, rate]) => {
            const webinfer = await import("./assets/webinfer.mjs");
            const s = await webinfer.load("model/artifact/");
            const out = await s.run({ audio: new Float32Array(pcm), sample_rate: rate });
            return { audio: s.audio, logits: Array.from(out.logits.data) };
        }""", [pcm.tolist(), int(rate)])
    finally:
        server.shutdown()
        server.server_close()
    assert got["audio"]["rate_dim"] == "audio_rate" and got["audio"]["features"] == "log_mel"
    native = InferenceSession(str(art)).run(None, {"audio": pcm, "sample_rate": rate})[0]
    features = whisper_reference(pcm, rate, 80)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"input_features": features})[0]
    np.testing.assert_allclose(native, want, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(np.array(got["logits"]).reshape(want.shape), want, rtol=1e-3, atol=1e-4)
