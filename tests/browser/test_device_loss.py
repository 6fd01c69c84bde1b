"""A lost GPU device in the page (webinfer/site/recover.mjs): a tiny Llama chat whose device is destroyed in the
middle of turn 2 and again between turns 2 and 3. The worker re-creates the device by itself, writes the weights
again from Cache Storage (no shard is fetched twice), re-opens the chat with its conversation (turn 3 prefills
only its own message), turn 2 completes with onnxruntime's greedy ids, and turn 3's ids equal both a fresh chat's
over the same conversation and onnxruntime's greedy loop."""

from __future__ import annotations

import json
import re

import pytest

from demos.recipes.smollm2 import ort_greedy

pytestmark = pytest.mark.browser
N = 16
USER = ["What is the capital of France?", "And the capital of Italy?", "Name a river in Germany."]

SCRIPT = """async ([users, n]) => {
  const webinfer = await import("./assets/webinfer.mjs");
  const events = [];
  webinfer.onDevice((e) => events.push(e));
  const opts = { maxNewTokens: n, temperature: 0, stopAtEos: false };
  async function turn(chat, messages, loseAt) {
    const ids = [];
    let lost = null;
    for await (const t of chat.send(messages, opts)) {
      ids.push(t.id);
      if (ids.length === loseAt) lost = await webinfer.debug.loseDevice();
    }
    return { ids, stats: chat.stats, lost };
  }
  const chat = await webinfer.chat("chat/artifact/");
  const conv = [{ role: "user", content: users[0] }];
  const one = await turn(chat, conv, 0);
  conv.push({ role: "assistant", content: one.stats.text }, { role: "user", content: users[1] });
  const two = await turn(chat, conv, 3);
  conv.push({ role: "assistant", content: two.stats.text });
  const idle = await webinfer.debug.loseDevice();
  conv.push({ role: "user", content: users[2] });
  const three = await turn(chat, conv, 0);
  const freshChat = await webinfer.chat("chat/artifact/");
  const fresh = await turn(freshChat, conv, 0);
  return { one, two, three, fresh, idle, events, conv, timings: [chat.timings, freshChat.timings] };
}"""


def _reference_ids(model_dir, messages) -> list[int]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return list(tok.encode(text, add_special_tokens=False))


def test_device_destroyed_mid_turn_and_between_turns(page, tiny_site):
    site, model_dir = tiny_site["site"], tiny_site["chat_model"]
    model = model_dir / "model.onnx"
    (site / "device-loss.html").write_text("<!doctype html><title>device loss</title>")
    manifest = json.loads((site / "chat" / "artifact" / "manifest.json").read_text())
    shard_files = {e["file"] for e in manifest["shards"]}
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(tiny_site["url"] + "device-loss.html")
    got = page.evaluate(SCRIPT, [USER, N])
    one, two, three, fresh, conv = got["one"], got["two"], got["three"], got["fresh"], got["conv"]

    assert one["ids"] == ort_greedy(model, _reference_ids(model_dir, conv[:1]), N)[0]
    # Turn 2: the device was destroyed after its third token; the turn ran again on the new device and the page
    # received each token once, the same as onnxruntime's.
    assert two["lost"]["reason"] == "destroyed" and got["idle"]["reason"] == "destroyed"
    recovery = two["stats"]["device_recovery"]
    assert recovery["reason"] == "destroyed" and recovery["sessions"] == 1
    assert two["stats"]["prompt_ids"] == _reference_ids(model_dir, conv[:3])
    assert two["ids"] == two["stats"]["token_ids"] == ort_greedy(model, two["stats"]["prompt_ids"], N)[0]
    # (the re-opened chat got the interrupted turn's prompt back; the turn's second run prefilled one token)
    assert recovery["restored_tokens"] == len(two["stats"]["prompt_ids"]) == two["stats"]["reused_tokens"] + 1
    # Two losses, two recoveries, said in one line each; the idle one restored the conversation into the KV cache.
    phases = [e["phase"] for e in got["events"]]
    assert phases == ["lost", "recovered", "lost", "recovered"], got["events"]
    texts = [e["text"] for e in got["events"] if e["phase"] == "recovered"]
    assert all(re.fullmatch(r"GPU device lost \(destroyed(: .+)?\); recovered in \d+ ms", t) for t in texts), texts
    idle = got["events"][3]
    assert idle["restored_tokens"] == len(two["stats"]["prompt_ids"]) + N - 1
    # Turn 3 on the recovered chat prefills only its new message, and samples what a fresh chat and onnxruntime do.
    conversation = _reference_ids(model_dir, conv)
    assert three["stats"]["prompt_ids"] == fresh["stats"]["prompt_ids"] == conversation
    assert len(two["stats"]["prompt_ids"]) <= three["stats"]["reused_tokens"] < len(conversation)
    assert "device_recovery" not in three["stats"]
    assert fresh["stats"]["reused_tokens"] == 0
    assert three["ids"] == fresh["ids"] == ort_greedy(model, conversation, N)[0]
    # The weights came back from Cache Storage: every shard was fetched from the server once, at the first load.
    fetched = [u for u in requests if any(u.endswith("/chat/artifact/" + f) for f in shard_files)]
    assert sorted(fetched) == sorted(tiny_site["url"] + "chat/artifact/" + f for f in shard_files), fetched
    first, again = got["timings"]
    print(f"device loss: recovered mid-turn in {recovery['ms']} ms, idle in {idle['ms']} ms (device "
          f"{idle['device_ms']} ms, weights from Cache Storage {idle['weights_ms']} ms, chat re-opened with "
          f"{idle['restored_tokens']} conversation tokens re-prefilled {idle['reopen_ms']} ms); the first load: "
          f"weights {first['weights_ms']} ms, session {first['session_ms']} ms; a fresh chat on the recovered device: "
          f"session {again['session_ms']} ms; turn 3 ids {three['ids']}")
