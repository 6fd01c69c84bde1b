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
