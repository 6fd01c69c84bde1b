"""site/speech.mjs (the JS API's audio input for Seq2Seq.transcribe) under Node: what reaches the worker for each
form a page has audio in, against numpy's layout of the same samples and the WAV file's own bytes."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import wave
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="needs Node (scripts/setup.sh installs it)")
SPEECH_JS = Path(__file__).resolve().parents[1] / "webinfer" / "site" / "speech.mjs"


def run_node(body: str, payload) -> list:
    """Run ``body`` (JS with ``audioMessage`` and ``input`` in scope, returning a list) and parse its result."""
    script = (f"import {{ audioMessage }} from {json.dumps(SPEECH_JS.as_uri())};\n"
              "let s = ''; process.stdin.on('data', (d) => { s += d; });\n"
              "process.stdin.on('end', async () => { const input = JSON.parse(s);\n"
              "const hexOf = (b) => Buffer.from(b).toString('hex');\n"
              "const fail = async (f) => { try { await f(); return null; } catch (e) { return e.message; } };\n"
              f"const out = await (async () => {{ {body} }})();\n"
              "process.stdout.write(JSON.stringify(out)); });\n")
    done = subprocess.run(["node", "--input-type=module", "-e", script], input=json.dumps(payload), text=True,
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_audio_message_layouts():
    rng = np.random.default_rng(3)
    left, right = (rng.uniform(-1, 1, 37).astype(np.float32) for _ in range(2))
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(22050)
        w.writeframes((left * 32767).astype("<i2").tobytes())
    wav = buf.getvalue()
    got = run_node("""
        const [l, r] = [Float32Array.from(input.left), Float32Array.from(input.right)];
        const wav = Uint8Array.from(Buffer.from(input.wav, "hex"));
        const forms = [await audioMessage(l, 44100), await audioMessage({ data: l, sampleRate: 8000 }),
                       await audioMessage({ channels: [l, r], sampleRate: 48000 }), await audioMessage(wav),
                       await audioMessage(wav.buffer.slice(0)), await audioMessage(new Blob([wav]))];
        const errors = [await fail(() => audioMessage(new Uint8Array(16))), await fail(() => audioMessage(l)),
                        await fail(() => audioMessage({ channels: [l, r.subarray(1)], sampleRate: 1 })),
                        await fail(() => audioMessage(new Float32Array(0), 16000)), await fail(() => audioMessage("x"))];
        return [forms.map(({ message: m, transfer }) => [hexOf(new Uint8Array(m.data)), m.sampleRate, m.channels,
                                                         transfer[0] === m.data]), errors];""",
                   {"left": left.tolist(), "right": right.tolist(), "wav": wav.hex()})
    forms, errors = got
    mono = left.tobytes().hex()
    assert forms[:3] == [[mono, 44100, 1, True], [mono, 8000, 1, True],
                         [np.stack([left, right]).tobytes().hex(), 48000, 2, True]]  # one row per channel
    assert forms[3:] == [[wav.hex(), 0, 0, True]] * 3  # a WAV file goes as its bytes (Python reads the header)
    assert "WAV file" in errors[0] and "sample rate" in errors[1]
    assert "one length" in errors[2] and "non-empty" in errors[3] and "expected" in errors[4]
