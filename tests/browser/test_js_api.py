"""The README's JavaScript API example, run as written: a page that loads a model and a chat through
webinfer.mjs (its Web Worker) and prints the model's outputs and a streamed reply, checked against native
webinfer and onnxruntime."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest

from demos.recipes.smollm2 import ort_greedy

pytestmark = pytest.mark.browser
README = Path(__file__).resolve().parents[2] / "README.md"


def readme_example() -> str:
    text = README.read_text()
    block = text.split("<!-- js-api-example -->", 1)[1]
    return block.split("```html\n", 1)[1].split("```", 1)[0]


def test_readme_example_runs(page, tiny_site):
    from webinfer.llm.generate import Generator
    from webinfer.runtime.inference import InferenceSession

    example = readme_example()
    assert 8 <= len(example.strip().splitlines()) <= 14, "the README promises a ten-line example"
    (tiny_site["site"] / "example.html").write_text(example)
    requests, console, errors = [], [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("console", lambda m: console.append(m.text))
    page.on("pageerror", lambda e: errors.append(str(e)))  # (the worker's uncaught errors reach the page)
    page.goto(tiny_site["url"] + "example.html")
    for _ in range(600):  # up to 300 s, but an error fails at once (the example sets data-done only on success)
        if page.locator("#out[data-done]").count() or errors:
            break
        page.wait_for_timeout(500)
    assert not errors, f"the example's page failed: {errors[:3]}\nconsole: {console[-10:]}"
    assert page.locator("#out[data-done]").count(), "the example did not finish in 300 s"
    text = page.locator("#out").inner_text()
    stats = json.loads(page.locator("#out").get_attribute("data-done"))

    x = np.arange(1, 6, dtype=np.float32)[None]
    native = InferenceSession(str(tiny_site["model"])).run(None, {"x": x})[0]
    np.testing.assert_allclose(native, np.tanh(x @ tiny_site["w"]), rtol=1e-5, atol=1e-6)
    head, reply = text.split("\n", 1)
    got = re.fullmatch(r"y = \[(.*)\] \(dims \[1,4\]\)", head)
    assert got, head
    np.testing.assert_allclose([float(v) for v in got.group(1).split(",")], native[0], rtol=1e-5, atol=1e-6)

    gen = Generator.load(str(tiny_site["chat"]))
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    want = [t.id for t in gen.chat(messages, max_new_tokens=16)]
    assert stats["prompt_ids"] == gen.stats["prompt_ids"] and stats["token_ids"] == want
    assert want == ort_greedy(tiny_site["chat_model"] / "model.onnx", gen.stats["prompt_ids"], len(want))[0]
    assert reply == gen.stats["text"]
    assert any(line.startswith("weights") for line in console)  # onProgress saw the weights stream in
    # close() frees the session in the worker: running it afterwards is a clear error, other sessions go on.
    closed = page.evaluate("""async () => {
        const webinfer = await import("./assets/webinfer.mjs");
        const a = await webinfer.load("model/artifact/"), b = await webinfer.load("model/artifact/");
        await a.close();
        const err = await a.run({ x: { data: [1, 2, 3, 4, 5], dims: [1, 5] } }).then(() => "ran", (e) => e.message);
        const y = await b.run({ x: { data: [1, 2, 3, 4, 5], dims: [1, 5] } });
        return [err, Array.from(y.y.data)]; }""")
    assert "no open session" in closed[0]
    np.testing.assert_allclose(closed[1], native[0], rtol=1e-5, atol=1e-6)
    assert {urlparse(u).hostname for u in requests} == {"127.0.0.1"}
