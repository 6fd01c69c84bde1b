"""The OpenAI-shaped API from the page's JavaScript, with no server (webinfer.mjs -> worker -> Pyodide):
chat.completions.create whole and streamed, checked against native webinfer's greedy Generator on the same
artifact (and logit_bias / logprobs against native webinfer's answer), and embeddings.create against numpy's
pooling of onnxruntime's hidden states. Structured output (response_format json_schema) and a forced tool call
(tool_choice "required") from the page equal native webinfer's answers and validate with `jsonschema`."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest
from sentence_ref import ort_sentence_embeddings

pytestmark = pytest.mark.browser
MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]
TEXTS = ["A man is eating food.", "hi"]
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"},
                                           "n": {"type": "integer", "minimum": 0, "maximum": 99},
                                           "tag": {"enum": ["red", "green"]}},
          "required": ["ok", "n", "tag"], "additionalProperties": False}
STRUCTURED = {"temperature": 0, "max_tokens": 60,
              "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA}}}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"enum": ["Paris", "Oslo"]}, "days": {"type": "integer", "minimum": 1,
                                                                                   "maximum": 7}},
    "required": ["city", "days"], "additionalProperties": False}}},
         {"type": "function", "function": {"name": "get_time", "parameters": {
             "type": "object", "properties": {"utc": {"type": "boolean"}}, "required": ["utc"],
             "additionalProperties": False}}}]
TOOL_CALL = {"temperature": 0, "max_tokens": 60, "tools": TOOLS, "tool_choice": "required"}

SCRIPT = """async ([messages, texts, structured, toolCall]) => {
  const webinfer = await import("./assets/webinfer.mjs");
  const client = await webinfer.openai({ chat: "chat/artifact/", embeddings: "similarity/artifact/" });
  const whole = await client.chat.completions.create({ messages, temperature: 0, max_tokens: 12 });
  const chunks = [];
  const stream = await client.chat.completions.create({ messages, temperature: 0, max_tokens: 12, stream: true,
                                                        stream_options: { include_usage: true } });
  for await (const c of stream) chunks.push(c);
  const emb = await client.embeddings.create({ input: texts });
  const biased = await client.chat.completions.create({ messages, temperature: 0, max_tokens: 3,
                                                        logit_bias: { "1000": 100 }, logprobs: true, top_logprobs: 2 });
  const json = await client.chat.completions.create({ messages, ...structured });
  const tool = await client.chat.completions.create({ messages, ...toolCall });
  const refused = await client.chat.completions.create({ messages, n: 2 }).then(() => "answered", (e) => e.message);
  return { whole, chunks, emb, biased, json, tool, refused, models: await client.models.list() };
}"""


@pytest.fixture(scope="module")
def api_site(tmp_path_factory, webinfer_wheel):
    import tiny_llama

    import webinfer
    from webinfer.bundle import bundle
    from webinfer.models import export_minilm
    from webinfer.serve import serve_in_thread

    tmp = tmp_path_factory.mktemp("api-site")
    chat_model = tiny_llama.tiny_llama(tiny_llama.TINY_CHAT)
    minilm = export_minilm()
    webinfer.build(str(chat_model / "model.onnx"), str(tmp / "chat.wi"), max_seq=512, target="software")
    webinfer.build(str(minilm / "model.onnx"), str(tmp / "minilm.wi"), target="software", sentence_embedding="auto")
    site = tmp / "site"
    bundle(str(tmp / "chat.wi"), str(site), demo="chat", wheel=webinfer_wheel)
    bundle(str(tmp / "minilm.wi"), str(site), demo="similarity", wheel=webinfer_wheel)
    (site / "api.html").write_text("<!doctype html><title>api</title>")
    server, url = serve_in_thread(str(site))
    yield {"url": url, "chat": tmp / "chat.wi", "minilm": minilm}
    server.shutdown()


def test_js_openai_api_matches_native(page, api_site):
    from webinfer.llm.generate import Generator

    page.goto(api_site["url"] + "api.html")
    got = page.evaluate(SCRIPT, [MESSAGES, TEXTS, STRUCTURED, TOOL_CALL])
    gen = Generator.load(str(api_site["chat"]))
    want = "".join(t.text for t in gen.chat(MESSAGES, max_new_tokens=12))
    n_prompt, n_out = len(gen.stats["prompt_ids"]), len(gen.stats["token_ids"])
    finish = "length" if n_out == 12 else "stop"
    whole = got["whole"]
    assert whole["object"] == "chat.completion" and whole["model"] == "chat"
    assert whole["choices"][0]["message"] == {"role": "assistant", "content": want, "refusal": None}
    assert whole["choices"][0]["finish_reason"] == finish
    assert whole["usage"] == {"prompt_tokens": n_prompt, "completion_tokens": n_out, "total_tokens": n_prompt + n_out}
    chunks = got["chunks"]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == want
    assert chunks[-2]["choices"][0]["finish_reason"] == finish and chunks[-1]["usage"] == whole["usage"]
    emb = np.array([d["embedding"] for d in got["emb"]["data"]])
    np.testing.assert_allclose(emb, ort_sentence_embeddings(api_site["minilm"], TEXTS), atol=2e-5)
    # logit_bias and logprobs on the page's GPU: the same answer as native webinfer's
    from webinfer.llm.openai_api import Client

    native = Client(gen).chat.completions.create(messages=MESSAGES, temperature=0, max_tokens=3,
                                                 logit_bias={"1000": 100}, logprobs=True, top_logprobs=2)
    assert got["biased"]["choices"][0]["message"] == native.choices[0].message
    page_lp, native_lp = got["biased"]["choices"][0]["logprobs"]["content"], native.choices[0].logprobs.content
    assert [e["token"] for e in page_lp] == [e["token"] for e in native_lp] == [gen.tokenizer.decode([1000])] * 3
    for a, b in zip(page_lp, native_lp):
        np.testing.assert_allclose([a["logprob"]] + [t["logprob"] for t in a["top_logprobs"]],
                                   [b["logprob"]] + [t["logprob"] for t in b["top_logprobs"]], rtol=1e-4, atol=1e-3)
    assert "n must be 1" in got["refused"] and "\n" not in got["refused"]
    assert [m["id"] for m in got["models"]["data"]] == ["chat", "similarity"]
    # structured output and a forced tool call: the page's answers are native webinfer's, and they validate
    client = Client(gen)
    native_json = client.chat.completions.create(messages=MESSAGES, **STRUCTURED).choices[0]
    page_json = got["json"]["choices"][0]
    assert page_json["message"]["content"] == native_json.message.content, (page_json, native_json)
    assert page_json["finish_reason"] == native_json.finish_reason == "stop"
    jsonschema.validate(json.loads(page_json["message"]["content"]), SCHEMA)
    native_tool = client.chat.completions.create(messages=MESSAGES, **TOOL_CALL).choices[0]
    page_tool = got["tool"]["choices"][0]
    assert page_tool["finish_reason"] == native_tool.finish_reason == "tool_calls", page_tool
    (call,) = page_tool["message"]["tool_calls"]
    (want_call,) = native_tool.message.tool_calls
    assert call["type"] == "function" and call["function"] == want_call.function
    params = next(t["function"]["parameters"] for t in TOOLS if t["function"]["name"] == call["function"]["name"])
    jsonschema.validate(json.loads(call["function"]["arguments"]), params)
