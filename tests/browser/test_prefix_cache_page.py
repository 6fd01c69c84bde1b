"""The chat page's prefix cache in Chromium (webinfer/site/prefix_store.mjs + llm/prefix_cache.py): a first visit
with a system prompt prefills it and stores its KV cache in Cache Storage; a reload (same browser profile)
restores it and prefills only the question, with the same greedy ids as the cold visit and as onnxruntime over
the whole conversation; an altered entry is refused with one console warning, the turn still right, and
replaced. Nothing of it is requested from the server."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from demos.recipes.smollm2 import ort_greedy

pytestmark = pytest.mark.browser
TIMEOUT_MS = 300_000
SYSTEM = " ".join(f"Rule {i}: answer briefly and politely, citing item {i}." for i in range(25))
QUESTION = "What is the capital of France?"
TAMPER = """async () => {
  const cache = await caches.open("webinfer-prefix-v1");
  const keys = await cache.keys();
  for (const req of keys) {
    const bytes = new Uint8Array(await (await cache.match(req)).arrayBuffer());
    bytes[bytes.length >> 1] ^= 0x5a;
    await cache.put(req, new Response(bytes));
  }
  return keys.length;
}"""


def _turn(page) -> dict:
    page.wait_for_selector("#answer[data-done]", state="attached", timeout=TIMEOUT_MS)
    el = page.locator("#answer")
    assert el.get_attribute("data-error") is None, el.get_attribute("data-error")
    return {k: json.loads(el.get_attribute(f"data-{k}")) for k in ("token-ids", "prompt-ids", "stats")}


def test_reload_restores_the_system_prompt_and_refuses_an_altered_one(page, tiny_site):
    from transformers import AutoTokenizer

    model_dir = tiny_site["chat_model"]
    requests, warnings = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("console", lambda m: warnings.append(m.text) if m.type == "warning" else None)
    page.goto(tiny_site["url"] + f"chat/?system={quote(SYSTEM)}&prompt={quote(QUESTION)}&max_new_tokens=8&greedy=1")
    cold = _turn(page)
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    want_ids = tok.encode(tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False),
                          add_special_tokens=False)
    assert cold["prompt-ids"] == want_ids
    assert cold["token-ids"] == ort_greedy(model_dir / "model.onnx", want_ids, len(cold["token-ids"]))[0]
    pc = cold["stats"]["prefix_cache"]
    assert pc["status"] == "miss" and pc["saved"] and cold["stats"]["reused_tokens"] == 0
    system_len = len(tok.encode(SYSTEM, add_special_tokens=False))
    assert system_len > 300

    page.reload()
    warm = _turn(page)
    pc = warm["stats"]["prefix_cache"]
    assert pc["status"] == "restored" and not pc.get("saved"), pc
    assert system_len < pc["positions"] == warm["stats"]["reused_tokens"] < len(want_ids)
    assert warm["prompt-ids"] == want_ids and warm["token-ids"] == cold["token-ids"]

    assert page.evaluate(TAMPER) == 1
    page.reload()
    bad = _turn(page)
    pc = bad["stats"]["prefix_cache"]
    assert pc["status"] == "refused" and "checksum" in pc["warning"] and pc["saved"], pc
    assert bad["stats"]["reused_tokens"] == 0 and bad["token-ids"] == cold["token-ids"]
    assert [w for w in warnings if "prefix cache ignored" in w and "checksum" in w and "\n" not in w]

    page.reload()
    again = _turn(page)
    assert again["stats"]["prefix_cache"]["status"] == "restored" and again["token-ids"] == cold["token-ids"]
    assert not [u for u in requests if "webinfer-prefix" in u]
