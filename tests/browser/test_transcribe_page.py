"""The speech-to-text page (webinfer/site/pages/transcribe) in headless Chromium: all inference in the worker, the
audio fed as the user has it (a WAV file through the page's file input; the microphone through Chromium's fake
audio capture of a WAV file), resampling and log-mel on the GPU (the artifact's audio prologue). The page's token
ids and transcript equal native webinfer's on the same audio, and native's ids equal onnxruntime's greedy loop
over the export (tests/llm/test_seq2seq.py's reference, on transformers' log-mel features of the same samples)."""

from __future__ import annotations

import base64
import json
import sys
from math import gcd
from pathlib import Path

import numpy as np
import pytest
import seq2seq_fixtures as fx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))
from test_seq2seq import SPEECH, _speech, ort_greedy  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow]
TIMEOUT_MS = 600_000
# A Whisper far smaller than tiny (random weights) for the microphone: same vocabulary, mels and 30 s window; weights
# drawn wider than the default 0.02 so that its ids change with the audio (at 0.02 it repeats one token)
MICRO = {**fx.WHISPER_TINY, "encoder_layers": 1, "decoder_layers": 1, "d_model": 64, "encoder_attention_heads": 2,
         "decoder_attention_heads": 2, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "init_std": 0.5}


def _serve(site):
    from webinfer.serve import serve_in_thread

    return serve_in_thread(str(site))


def _ort_ids(folder, samples: np.ndarray, rate: int, first, eos, n: int) -> list[int]:
    """onnxruntime's greedy ids over transformers' features of ``samples`` brought to 16 kHz by resample_poly."""
    from scipy.signal import resample_poly
    from transformers import WhisperFeatureExtractor

    if rate != 16000:
        g = gcd(16000, rate)
        samples = resample_poly(samples.astype(np.float64), 16000 // g, rate // g)
    feats = WhisperFeatureExtractor.from_pretrained(str(folder))(
        np.asarray(samples, np.float32), sampling_rate=16000, return_tensors="np").input_features
    return ort_greedy(folder, {"input_features": feats}, first, eos, n)


def _result(page) -> dict:
    page.wait_for_selector("#result[data-done]", state="attached", timeout=TIMEOUT_MS)
    el = page.locator("#result")
    error = el.get_attribute("data-error")
    assert error is None, error
    return {"ids": json.loads(el.get_attribute("data-token-ids")), "text": el.get_attribute("data-text"),
            "streamed": json.loads(el.get_attribute("data-streamed")),
            "shown": page.locator("#transcript").text_content()}


def _ready(page) -> None:
    page.wait_for_selector("body[data-ready], #result[data-error]", state="attached", timeout=TIMEOUT_MS)
    error = page.locator("#result").get_attribute("data-error")
    assert error is None, error


def _wav_samples(path) -> tuple[np.ndarray, int]:
    from webinfer.runtime.audio import read_wav

    pcm, rate = read_wav(str(path))
    return np.frombuffer(pcm.data, np.float32).reshape(pcm.shape).mean(axis=0), rate


def test_transcribe_page_file_equals_native_and_onnxruntime(page, tmp_path, webinfer_wheel, capsys):
    """whisper tiny.en (real weights, demos/site.py's recipe and build options): an espeak-ng clip at espeak's own
    22.05 kHz picked in the file input (resampled to 16 kHz on the GPU). (Five clips natively against onnxruntime:
    tests/llm/test_seq2seq.py's real-weights test.)"""
    import time

    from tokenizers import Tokenizer

    from demos.recipes.whisper import tiny_en_folder
    from demos.site import ARTIFACTS, build_site
    from webinfer.cli import main as cli

    folder = tiny_en_folder()
    site = build_site(tmp_path / "site", ["transcribe"], wheel=webinfer_wheel)
    art = ARTIFACTS / "transcribe.wi"
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    first, eos, n = [50257, 50362], {50256}, 24
    server, url = _serve(site)
    try:
        page.goto(url)
        assert "transcribe/" in page.locator("ul.demos a").evaluate_all("els => els.map(e => e.getAttribute('href'))")
        page.goto(url + f"transcribe/?max_new_tokens={n}")
        t0 = time.perf_counter()
        _ready(page)
        report = [f"page ready in {time.perf_counter() - t0:.0f} s"]
        page.evaluate("""() => { const el = document.getElementById("transcript"); window.transcriptSeen = [];
            new MutationObserver(() => { const t = el.textContent, seen = window.transcriptSeen;
                if (t && t !== seen.at(-1)) seen.push(t); }).observe(el, { childList: true, characterData: true,
                                                                           subtree: true }); }""")
        i = 0
        _speech(tmp_path, i, SPEECH[i])
        wav = tmp_path / f"raw{i}.wav"  # espeak-ng's own file, 22.05 kHz
        t0 = time.perf_counter()
        page.set_input_files("#file", str(wav))
        got = _result(page)
        report.append(f"page transcribed in {time.perf_counter() - t0:.0f} s")
        assert got["streamed"] == got["ids"]  # every token streamed as it came
        assert got["shown"] == got["text"]
        growing = page.evaluate("() => window.transcriptSeen")  # the transcript as it was shown while decoding
        assert len(growing) > 1 and all(b.startswith(a) for a, b in zip(growing, growing[1:]))
        capsys.readouterr()
        assert cli(["transcribe", str(art), str(wav), "--json", "--max-new-tokens", str(n)]) == 0
        native = json.loads(capsys.readouterr().out)
        samples, rate = _wav_samples(wav)
        want = _ort_ids(folder, samples, rate, first, eos, n)
        report.append(f"clip {i} ({rate} Hz) {SPEECH[i]!r}: page {got['ids']} {got['text']!r}, shown as "
                      f"{growing}; native {native['token_ids']} {native['text']!r}; onnxruntime {want} "
                      f"{tok.decode(want, skip_special_tokens=True)!r}")
        with capsys.disabled():
            print("\n".join(report))
        assert got["ids"] == native["token_ids"] and got["text"] == native["text"]
        assert native["token_ids"] == want
        assert native["text"] == tok.decode(want, skip_special_tokens=True)
    finally:
        server.shutdown()
        server.server_close()


def test_transcribe_page_microphone_equals_native(browser_type, browser_type_launch_args, tmp_path, webinfer_wheel):
    """The microphone button: Chromium's fake capture device plays an espeak-ng WAV; the page records PCM at the
    AudioContext's rate, and the same samples natively give the same ids (a small random Whisper); so does
    webinfer.pipeline("automatic-speech-recognition", url) on them in the page."""
    import webinfer
    from webinfer.bundle import bundle
    from webinfer.tasks import pipeline

    folder = fx.whisper_tiny(MICRO, "whisper-micro-random")
    art = tmp_path / "micro.wi"
    webinfer.build(str(folder), str(art), target="software", tiles="startup")
    bundle(str(art), str(tmp_path / "site"), demo="transcribe", wheel=webinfer_wheel)
    wav, _ = _speech(tmp_path, 1, SPEECH[1])
    n = 16
    browser = browser_type.launch(**{**browser_type_launch_args, "args": browser_type_launch_args["args"] + [
        "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
        f"--use-file-for-fake-audio-capture={wav}", "--autoplay-policy=no-user-gesture-required"]})
    server, url = _serve(tmp_path / "site")
    try:
        page = browser.new_page()
        page.goto(url + f"transcribe/?max_new_tokens={n}")
        _ready(page)
        page.click("#mic")
        page.wait_for_selector("#result[data-recording]", state="attached", timeout=60_000)
        page.wait_for_timeout(2500)  # (how much is recorded; nothing is timed)
        page.click("#mic")
        got = _result(page)
        b64, rate = page.evaluate("""() => { const d = window.webinferDemo, b = new Uint8Array(d.pcm.buffer);
            let s = ""; for (let i = 0; i < b.length; i += 8192) s += String.fromCharCode(...b.subarray(i, i + 8192));
            return [btoa(s), d.sampleRate]; }""")
        pcm = np.frombuffer(base64.b64decode(b64), np.float32)
        assert rate >= 8000 and len(pcm) > rate  # over a second recorded at the AudioContext's rate
        assert np.abs(pcm).max() > 0.01  # the fake device played the speech, not silence
        assert got["streamed"] == got["ids"] and len(got["ids"]) > 0
        asr = pipeline("automatic-speech-recognition", str(art))
        native = asr((pcm, rate), max_new_tokens=n)
        print(f"microphone: {len(pcm)} samples at {rate} Hz; page {got['ids']}; native {native['token_ids']}")
        assert got["ids"] == native["token_ids"] and got["text"] == native["text"]
        # the JS API's one call, on the same PCM and its rate: the same ids, streamed
        one = page.evaluate("""async (n) => { const webinfer = await import("../assets/webinfer.mjs");
            const asr = await webinfer.pipeline("automatic-speech-recognition", "artifact/"), d = window.webinferDemo;
            const streamed = [];
            const out = await asr(d.pcm, { sampleRate: d.sampleRate, maxNewTokens: n, onToken: (t) => streamed.push(t.id) });
            await asr.close();
            return [out.token_ids, out.text, streamed]; }""", n)
        assert one == [got["ids"], got["text"], got["ids"]]
        silence = asr((np.zeros(rate, np.float32), rate), max_new_tokens=n)["token_ids"]
        assert silence != got["ids"]  # the ids depend on what the microphone heard
        assert native["token_ids"] == _ort_ids(folder, pcm, rate, [50258, 50259, 50359, 50363], {50257}, n)
    finally:
        browser.close()
        server.shutdown()
        server.server_close()
