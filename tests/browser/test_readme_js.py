"""The README's JavaScript task examples run as written in Chromium: each block verbatim as a module beside a
bundled site holding the artifacts and files its marker names (small models built here), imported one after the
other by a page (one Web Worker, one Pyodide start); what each prints (console.log) is checked against
onnxruntime and numpy over the same models. The Python twins: tests/test_readme_examples.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import onnxruntime as ort
import pytest
from PIL import Image

from tests import readme_examples as rx
from webinfer.build import build

pytestmark = pytest.mark.browser
EXAMPLES = rx.examples("js")
TIMEOUT_MS = 900_000
DRIVER = """<!doctype html><title>README examples</title><body><script type="module">
for (const task of %s) {
  console.log(`=== ${task}`);
  try { await import(`./example-${task}.mjs`); } catch (e) { console.log(`!!! ${task}: ${e.message}`); }
}
document.body.dataset.done = "1";
</script></body>"""


def _bundle_as(art: str, site: Path, name: str, wheel: str) -> None:
    """An artifact at SITE/NAME/artifact/ (the generic page, moved to its own folder)."""
    from webinfer.bundle import bundle

    bundle(art, str(site), wheel=wheel)
    shutil.move(str(site / "model"), str(site / name))


def run_examples(page, site: Path, tasks: list[str], provided: set[str]) -> dict[str, list[str]]:
    """Serve ``site``, run the README's blocks for ``tasks`` in order; returns each task's console lines."""
    from webinfer.serve import serve_in_thread

    for task in tasks:
        needs, code = EXAMPLES[task]
        assert set(needs) <= provided, f"the {task} example needs {needs}; the test provides {sorted(provided)}"
        (site / f"example-{task}.mjs").write_text(code)
    (site / "readme.html").write_text(DRIVER % json.dumps(tasks))
    server, url = serve_in_thread(str(site))
    console, requests = [], []  # console.log lines only: the examples print with it (errors: failed loads...)
    page.on("console", lambda m: console.append(m.text) if m.type == "log" else None)
    page.on("request", lambda r: requests.append(r.url))
    try:
        page.goto(url + "readme.html")
        page.wait_for_selector("body[data-done]", state="attached", timeout=TIMEOUT_MS)
    finally:
        server.shutdown()
        server.server_close()
    assert {urlparse(u).hostname for u in requests} == {"127.0.0.1"}
    out, task = {}, None
    for line in console:
        if line.startswith("=== "):
            task = line[4:]
            out[task] = []
        elif task:
            assert not line.startswith("!!! "), line + "\nconsole:\n" + "\n".join(console[-30:])
            out[task].append(line)
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory, webinfer_wheel):
    """The artifacts of the quick examples (all but speech), bundled where the README's blocks look for them."""
    import seq2seq_fixtures as fx
    import tiny_llama

    from tests.graph.test_prepost import MEAN, STD, classifier_model
    from webinfer.bundle import bundle
    from webinfer.models import export_minilm

    tmp = tmp_path_factory.mktemp("readme-js")
    site = tmp / "site"
    (tmp / "labels.txt").write_text("a\nb\nc\nd\ne\nf\n")
    pre = {"resize": {"shorter": 18}, "crop": [16, 16], "mean": MEAN, "std": STD}
    cls = classifier_model()
    build(cls, str(tmp / "cls.wi"), target="software", preprocess=pre,
          postprocess={"softmax": True, "top_k": 3, "labels": str(tmp / "labels.txt")})
    minilm = export_minilm()
    build(str(minilm / "model.onnx"), str(tmp / "minilm.wi"), target="software", sentence_embedding="auto")
    chat = tiny_llama.tiny_llama(tiny_llama.TINY_CHAT)
    build(str(chat / "model.onnx"), str(tmp / "chat.wi"), target="software", max_seq=256)
    marian = fx.marian_tiny()
    build(str(marian), str(tmp / "marian.wi"), target="software")
    det = rx.detector(str(tmp / "det.wi"), tmp)
    matte = rx.matting(str(tmp / "bg.wi"))
    for art, demo in (("cls", "classify"), ("minilm", "similarity"), ("chat", "chat"), ("det", "detect"),
                      ("bg", "removebg")):
        bundle(str(tmp / f"{art}.wi"), str(site), demo=demo, wheel=webinfer_wheel)
    _bundle_as(str(tmp / "marian.wi"), site, "marian", webinfer_wheel)
    Image.fromarray(rx.photo()).save(site / "photo.png")
    provided = {"classify/artifact/", "similarity/artifact/", "chat/artifact/", "marian/artifact/",
                "detect/artifact/", "removebg/artifact/", "photo.png"}
    return {"site": site, "provided": provided, "cls": (cls, pre), "minilm": minilm, "chat": chat,
            "marian": marian, "det": det, "matte": matte}


def test_readme_js_examples(page, site):
    from sentence_ref import ort_sentence_embeddings
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    from demos.recipes.smollm2 import ort_greedy as ort_greedy_decoder
    from tests.graph.test_detect_epilogue import assert_same_detections
    from tests.graph.test_prepost import preprocess_reference
    from tests.llm.test_seq2seq import _source, ort_greedy

    tasks = [t for t in rx.TASKS if t != "automatic-speech-recognition"]
    out = run_examples(page, site["site"], tasks, site["provided"])
    assert sorted(out) == sorted(tasks)

    cls, pre = site["cls"]
    rgba = np.concatenate([rx.photo(), np.full((70, 100, 1), 255, np.uint8)], -1)
    logits = ort.InferenceSession(cls.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": preprocess_reference(rgba, pre)})[0][0].astype(np.float64)
    probs = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    rows = [line.split() for line in out["image-classification"]]
    assert [r[0] for r in rows] == ["abcdef"[i] for i in np.argsort(-probs)[:3]]
    np.testing.assert_allclose([float(r[1]) for r in rows], np.sort(probs)[::-1][:3], atol=2e-4)

    a, b = ort_sentence_embeddings(site["minilm"], rx.TEXTS)
    (line,) = out["feature-extraction"]
    assert line.startswith("cosine ") and abs(float(line.split()[1]) - float(a @ b)) < 2e-4, (line, a @ b)

    ids_line, text = out["text-generation"]
    ids = json.loads(ids_line)
    import tiny_llama

    tok = AutoTokenizer.from_pretrained(str(tiny_llama.tokenizer_dir()))
    prompt = tok(tok.apply_chat_template(rx.MESSAGES, add_generation_prompt=True, tokenize=False),
                 add_special_tokens=False)["input_ids"]
    assert 0 < len(ids) <= 16 and ids == ort_greedy_decoder(site["chat"] / "model.onnx", prompt, len(ids))[0]
    assert text == tok.decode(ids, skip_special_tokens=True)

    ids_line, text = out["translation"]
    marian = site["marian"]
    want = ort_greedy(marian, _source(marian, rx.SOURCE_TEXT), [2], {1}, 32)
    assert json.loads(ids_line) == want
    assert text == Tokenizer.from_file(str(marian / "tokenizer.json")).decode(want)

    got = []
    for line in out["object-detection"]:
        label, score, box = line.split(" ", 2)
        got.append({"label": label, "score": float(score), "box": json.loads(box)})
    want = rx.detections_reference(site["det"]["model"], site["det"]["post"], rx.photo())
    assert len(want) > 3
    assert_same_detections(got, want, "README object-detection example in Chromium")

    (line,) = out["background-removal"]
    w, h, kept = map(int, line.split())
    matte = rx.matte_reference(site["matte"], rx.photo())
    near = np.abs(matte - 0.5) <= 1e-3
    assert (w, h) == (100, 70) and 0 < kept < w * h
    assert int((matte > 0.5).sum()) - near.sum() <= kept <= int((matte > 0.5).sum()) + near.sum()


@pytest.mark.slow
def test_readme_js_speech_example(page, tmp_path, webinfer_wheel):
    """OpenAI's whisper tiny.en (real weights from a package) given a WAV file in the page (resampling and log-mel
    on the GPU): the ids equal onnxruntime's greedy loop over the same export on transformers' log-mel of it."""
    import shutil

    from tokenizers import Tokenizer
    from transformers import WhisperFeatureExtractor

    from tests.llm.test_seq2seq import _speech, ort_greedy

    folder = rx.whisper_en()
    build(str(folder), str(tmp_path / "whisper.wi"), target="software")  # the audio prologue: PCM in
    site = tmp_path / "site"
    _bundle_as(str(tmp_path / "whisper.wi"), site, "whisper", webinfer_wheel)
    wav, samples = _speech(tmp_path, 0, rx.SPEECH_TEXT)
    shutil.copy(wav, site / "clip.wav")
    feats = WhisperFeatureExtractor.from_pretrained(str(folder))(
        np.array(samples), sampling_rate=16000, return_tensors="np").input_features.astype(np.float32)
    out = run_examples(page, site, ["automatic-speech-recognition"], {"whisper/artifact/", "clip.wav"})
    ids_line, text = out["automatic-speech-recognition"]
    want = ort_greedy(folder, {"input_features": feats}, [50257, 50362], {50256}, 24)
    assert json.loads(ids_line) == want
    assert text == Tokenizer.from_file(str(folder / "tokenizer.json")).decode(want, skip_special_tokens=True)
    assert "tomorrow" in text.lower()
