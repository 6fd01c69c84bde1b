"""Silero VAD (the `silero-vad` PyPI wheel's .onnx files, fetched into the zoo cache by scripts/setup.sh) vs
onnxruntime CPU on speech made with espeak-ng, 16 kHz, in 512-sample chunks with 64 samples of context and the
LSTM state carried from chunk to chunk (as the package's own iterator feeds it).

silero_vad.onnx picks 16 or 8 kHz weights in an If on its `sr` input and keeps its LSTM in nested If branches
(the graph that broke identity elimination: "already an output of a different graph"); the op15 export has
the same decoder without the rate switch. Both decide branches on the chunk's shape (torch's squeeze-if-one),
so they are built for one chunk size: branches whose outputs differ in shape cannot share one artifact."""

from __future__ import annotations

import shutil
import subprocess
import wave
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from model_compare import assert_close_to_peak

from webinfer.build import build
from webinfer.runtime.inference import InferenceSession

pytestmark = pytest.mark.slow
ZOO_MODELS = Path.home() / ".cache/webinfer/zoo/models"  # scripts/fetch_zoo.py (the silero-vad wheel's files)
CHUNK, CONTEXT, CHUNKS = 512, 64, 24


@pytest.fixture(scope="module")
def speech(tmp_path_factory) -> np.ndarray:
    if not (shutil.which("espeak-ng") and shutil.which("sox")):
        pytest.fail("espeak-ng and sox are missing: scripts/setup.sh installs them")
    d = tmp_path_factory.mktemp("speech")
    subprocess.run(["espeak-ng", "-w", str(d / "raw.wav"), "Voice activity detection finds the speech in a "
                    "recording. The quick brown fox jumps over the lazy dog."], check=True, capture_output=True)
    subprocess.run(["sox", str(d / "raw.wav"), "-r", "16000", "-c", "1", "-b", "16", str(d / "s.wav"),
                    "pad", "0.3", "0.3"], check=True, capture_output=True)
    with wave.open(str(d / "s.wav")) as w:
        return np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768


def model_file(name: str, tmp_path) -> str:
    path = ZOO_MODELS / name
    if not path.exists():
        pytest.fail(f"{path} is missing: scripts/setup.sh fetches it (scripts/fetch_zoo.py)")
    return str(path)


@pytest.mark.parametrize("name,dims", [
    ("silero-vad-v6.onnx", {"input_0": 1, "input_1": CHUNK + CONTEXT, "state_1": 1}),
    ("silero-vad-16k-op15.onnx", {"batch": 1, "sequence": CHUNK + CONTEXT}),
])
def test_silero_vad_streaming_equals_onnxruntime(name, dims, speech, tmp_path):
    path = model_file(name, tmp_path)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rate = {"sr": np.array(16000, np.int64)} if any(i.name == "sr" for i in ref.get_inputs()) else {}
    build(path, str(tmp_path / "art"), dims=dims, input_values=rate, target="software")
    sess = InferenceSession(str(tmp_path / "art"))
    context = np.zeros((1, CONTEXT), np.float32)
    state_ref = state_got = np.zeros((2, 1, 128), np.float32)
    probs = []
    for k in range(CHUNKS):
        chunk = speech[None, k * CHUNK:(k + 1) * CHUNK]
        x = np.concatenate([context, chunk], axis=1)
        context = chunk[:, -CONTEXT:]
        want = ref.run(None, {"input": x, "state": state_ref, **rate})
        got = sess.run(None, {"input": x, "state": state_got})
        for g, w, what in zip(got, want, ("probability", "state")):
            assert_close_to_peak(g, w, f"{name} chunk {k} {what}", rel=1e-3)
        state_ref, state_got = want[1], got[1]
        probs.append(float(want[0].ravel()[0]))
    assert min(probs) < 0.1 and max(probs) > 0.9, f"the input should hold silence and speech: {probs}"
