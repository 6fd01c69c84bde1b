"""The OpenAI-shaped API (webinfer/llm/openai_api.py, webinfer/serve_api.py), checked with the real ``openai``
client against `webinfer serve --api` on SmolLM2-135M-Instruct and all-MiniLM-L6-v2: a streamed completion's
text equals the Generator's greedy text (itself equal to onnxruntime's, test_smollm_greedy.py), embeddings
equal numpy's pooling over onnxruntime's hidden states; unsupported parameters get one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import numpy as np
import pytest
from sentence_ref import ort_sentence_embeddings

import webinfer
from webinfer.llm.openai_api import Client
from webinfer.serve_api import MAX_BODY, serve_api_in_thread

MESSAGES = [{"role": "user", "content": "Name three colours."}]


@pytest.fixture(scope="module")
def minilm_wi(tmp_path_factory):
    from webinfer.models import export_minilm

    src = export_minilm()
    out = tmp_path_factory.mktemp("minilm") / "minilm.wi"
    webinfer.build(str(src / "model.onnx"), str(out), target="software", sentence_embedding="auto")
    return src, out


@pytest.fixture(scope="module")
def smol_wi(smollm_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("smol") / "smol.wi"
    webinfer.build(str(smollm_dir / "model.onnx"), str(out), max_seq=512, target="software")
    return out


@pytest.fixture(scope="module")
def server(smol_wi, minilm_wi):
    client = Client.load(str(smol_wi), str(minilm_wi[1]))
    srv, url = serve_api_in_thread(client)
    yield client, url
    srv.shutdown()
    srv.server_close()


@pytest.mark.slow
def test_openai_client_streams_chat_and_embeddings(server, minilm_wi):
    import openai

    client, url = server
    oa = openai.OpenAI(base_url=url, api_key="none")
    assert [m.id for m in oa.models.list()] == ["smol", "minilm"]
    stream = oa.chat.completions.create(model="smol", messages=MESSAGES, stream=True, temperature=0, max_tokens=24,
                                        stream_options={"include_usage": True})
    parts, finish, usage, roles = [], None, None, []
    for chunk in stream:
        if chunk.choices:
            parts.append(chunk.choices[0].delta.content or "")
            roles.append(chunk.choices[0].delta.role)
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage is not None:
            usage = chunk.usage
    want = "".join(t.text for t in client.generator.chat(MESSAGES, max_new_tokens=24))
    stats = client.generator.stats
    assert "".join(parts) == want and want
    assert roles[0] == "assistant" and finish == ("length" if len(stats["token_ids"]) == 24 else "stop")
    assert (usage.prompt_tokens, usage.completion_tokens) == (len(stats["prompt_ids"]), len(stats["token_ids"]))
    # the same request, not streamed; and a stop string trims the text before it
    whole = oa.chat.completions.create(model="smol", messages=MESSAGES, temperature=0, max_tokens=24)
    assert whole.choices[0].message.content == want and whole.object == "chat.completion"
    cut = want.split()[2]
    stopped = oa.chat.completions.create(messages=MESSAGES, model="smol", temperature=0, max_tokens=24, stop=[cut])
    assert stopped.choices[0].message.content == want[:want.index(cut)]
    assert stopped.choices[0].finish_reason == "stop"

    texts = ["A man is eating food.", "The weather is lovely today, isn't it?", "hi"]
    emb = oa.embeddings.create(model="minilm", input=texts)  # (the client asks for base64 float32)
    got = np.array([d.embedding for d in emb.data])
    np.testing.assert_allclose(got, ort_sentence_embeddings(minilm_wi[0], texts), atol=2e-5)
    assert emb.usage.prompt_tokens > len(texts)
    floats = oa.embeddings.create(model="minilm", input="hi", encoding_format="float")
    np.testing.assert_allclose(floats.data[0].embedding, got[2], atol=1e-6)
    from webinfer.tasks import pipeline

    np.testing.assert_allclose(pipeline("feature-extraction", str(minilm_wi[1]))(texts), got, atol=1e-6)


@pytest.mark.slow
def test_api_errors_are_one_line_openai_shaped(server):
    import openai

    _, url = server
    oa = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
    cases = [({"logit_bias": {"5": 101}}, openai.BadRequestError, "logit_bias"),
             ({"logprobs": True, "top_logprobs": 21}, openai.BadRequestError, "top_logprobs"),
             ({"logit_bias": {"49152": 1}}, openai.BadRequestError, "outside the vocabulary"),
             ({"n": 2}, openai.BadRequestError, "n must be 1"),
             ({"model": "nope"}, openai.NotFoundError, "not loaded"),
             ({"temperature": 3}, openai.BadRequestError, "temperature")]
    for extra, exc, words in cases:
        with pytest.raises(exc) as info:
            oa.chat.completions.create(**{"model": "smol", "messages": MESSAGES, "max_tokens": 2, **extra})
        body = info.value.body
        assert words in body["message"] and "\n" not in body["message"], body
    for path, data, status in (("/v1/nothing", None, 404), ("/v1/chat/completions", b"{not json", 400),
                               ("/v1/chat/completions", b"[]", 400)):
        req = urllib.request.Request(url[:-3] + path, data=data, method="POST" if data else "GET",
                                     headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(req)
        assert info.value.code == status and set(json.loads(info.value.read())["error"]) >= {"message", "type"}
    # a body over the bound is refused from its Content-Length, before it is read
    import socket
    from urllib.parse import urlparse

    u = urlparse(url)
    with socket.create_connection((u.hostname, u.port), timeout=30) as sock:
        sock.sendall(f"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: {MAX_BODY + 1}\r\n\r\n".encode())
        reply = b""
        while b'"error"' not in reply:  # (headers and body may come in separate segments)
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
        reply = reply.decode()
    assert reply.startswith("HTTP/1.1 413") and '"error"' in reply


def test_serve_api_cli_refuses_a_folder_without_manifest(tmp_path):
    r = subprocess.run([sys.executable, "-m", "webinfer.cli", "serve", str(tmp_path), "--api", "--port", "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip().startswith("webinfer: error:") and len(r.stderr.splitlines()) == 1


def ort_logits(model_path, ids: list[int]) -> np.ndarray:
    """onnxruntime's logits at every position of ``ids`` (one pass, empty cache), float64."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    past = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32) for i in sess.get_inputs()
            if i.name.startswith("past_key_values.")}
    feeds = {"input_ids": np.array([ids]), "attention_mask": np.ones((1, len(ids)), np.int64),
             "position_ids": np.arange(len(ids))[None], **past}
    names = {i.name for i in sess.get_inputs()}
    return sess.run(["logits"], {k: v for k, v in feeds.items() if k in names})[0][0].astype(np.float64)


def log_softmax(row: np.ndarray) -> np.ndarray:
    m = row.max()
    return row - m - np.log(np.exp(row - m).sum())


@pytest.mark.slow
def test_logprobs_and_logit_bias_on_the_gpu_match_onnxruntime(server, smollm_dir):
    import openai

    client, url = server
    oa = openai.OpenAI(base_url=url, api_key="none")
    r = oa.chat.completions.create(model="smol", messages=MESSAGES, temperature=0, max_tokens=6, logprobs=True,
                                   top_logprobs=5)
    stats = client.generator.stats
    prompt, out = stats["prompt_ids"], stats["token_ids"]
    logits = ort_logits(smollm_dir / "model.onnx", prompt + out[:-1])
    entries = r.choices[0].logprobs.content
    assert len(entries) == len(out)
    for j, e in enumerate(entries):
        ref = log_softmax(logits[len(prompt) - 1 + j])
        assert abs(e.logprob - ref[out[j]]) < 2e-3
        np.testing.assert_allclose([t.logprob for t in e.top_logprobs], np.sort(ref)[::-1][:5], atol=2e-3)
        assert e.top_logprobs[0].token == e.token == client.generator.tokenizer.decode([out[j]])
    # streamed: the same entries, spread over the content chunks
    chunks = oa.chat.completions.create(model="smol", messages=MESSAGES, temperature=0, max_tokens=6, logprobs=True,
                                        top_logprobs=5, stream=True)
    streamed = [e for c in chunks for e in ((c.choices[0].logprobs.content or []) if c.choices[0].logprobs else [])]
    assert [(e.token, round(e.logprob, 4)) for e in streamed] == [(e.token, round(e.logprob, 4)) for e in entries]
    # a bias of -100 on the greedy first token: the runner-up comes first; +100 on another token forces it
    first = log_softmax(logits[len(prompt) - 1])
    best, second = (int(i) for i in np.argsort(-first)[:2])
    oa.chat.completions.create(model="smol", messages=MESSAGES, temperature=0, max_tokens=1,
                               logit_bias={str(best): -100})
    assert client.generator.stats["token_ids"] == [second]
    forced = oa.chat.completions.create(model="smol", messages=MESSAGES, temperature=0, max_tokens=2, logprobs=True,
                                        logit_bias={"1000": 100})
    assert client.generator.stats["token_ids"] == [1000, 1000]
    assert forced.choices[0].logprobs.content[0].logprob > -1e-3  # (log-probabilities of the biased logits)


def test_serve_api_cli_answers_the_openai_client(tiny_chat_dir, tmp_path):
    """`webinfer serve ART --api --port 0` as a user starts it: the printed URL serves /v1/models and a chat
    completion equal to the Generator's greedy text; Ctrl-C stops it."""
    import os
    import signal

    import openai

    from webinfer.llm.generate import Generator

    art = tmp_path / "tiny.wi"
    webinfer.build(str(tiny_chat_dir / "model.onnx"), str(art), max_seq=128, target="software")
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    # (SIGINT back to its default in the child: a shell's background job inherits it ignored, and Python then
    # installs no KeyboardInterrupt handler, so Ctrl-C would never reach the server)
    proc = subprocess.Popen([sys.executable, "-m", "webinfer.cli", "serve", str(art), "--api", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        line = proc.stdout.readline()
        assert line.startswith("OpenAI API for tiny on http://127.0.0.1:"), line + proc.stderr.read()
        url = line.split(" on ", 1)[1].split()[0]
        oa = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
        assert [m.id for m in oa.models.list()] == ["tiny"]
        r = oa.chat.completions.create(model="tiny", messages=MESSAGES, temperature=0, max_tokens=8)
        gen = Generator.load(str(art))
        assert r.choices[0].message.content == "".join(t.text for t in gen.chat(MESSAGES, max_new_tokens=8))
        with pytest.raises(openai.NotFoundError):
            oa.embeddings.create(model="tiny", input="x")  # no embedding model is served
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    assert proc.returncode == 0


@pytest.mark.slow
def test_structured_output_and_forced_tool_calls_through_the_openai_client(server):
    """response_format json_schema and tool_choice "required" go through constrained decoding (llm/constrain):
    every answer parses and validates (jsonschema), every forced call names a given tool with valid arguments."""
    import jsonschema
    import openai

    _, url = server
    oa = openai.OpenAI(base_url=url, api_key="none")
    person = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                               "age": {"type": "integer", "minimum": 0, "maximum": 120}},
              "required": ["name", "age"], "additionalProperties": False}
    for seed in range(3):
        reply = oa.chat.completions.create(
            model="smol", messages=[{"role": "user", "content": "Describe a person as JSON."}], seed=seed,
            temperature=0.7, max_tokens=40, response_format={"type": "json_schema",
                                                             "json_schema": {"name": "person", "schema": person}})
        jsonschema.validate(json.loads(reply.choices[0].message.content), person)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"],
        "additionalProperties": False}}},
             {"type": "function", "function": {"name": "get_time", "parameters": {
                 "type": "object", "properties": {"zone": {"type": "string", "maxLength": 10}}, "required": ["zone"],
                 "additionalProperties": False}}}]
    for seed in range(3):
        reply = oa.chat.completions.create(
            model="smol", messages=[{"role": "user", "content": "What is the weather in Paris?"}], seed=seed,
            temperature=0.7, max_tokens=60, tools=tools, tool_choice="required")
        choice = reply.choices[0]
        assert choice.finish_reason == "tool_calls", choice
        (call,) = choice.message.tool_calls
        tool = next(t for t in tools if t["function"]["name"] == call.function.name)
        jsonschema.validate(json.loads(call.function.arguments), tool["function"]["parameters"])


TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 24},
                                         "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "set_timer", "parameters": {
        "type": "object", "properties": {"minutes": {"type": "integer", "minimum": 1, "maximum": 180},
                                         "label": {"type": "string", "maxLength": 16}},
        "required": ["minutes"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "convert_currency", "parameters": {
        "type": "object", "properties": {"amount": {"type": "number", "minimum": 0, "maximum": 1000000},
                                         "from": {"type": "string", "pattern": "^[A-Z]{3}$"},
                                         "to": {"type": "string", "pattern": "^[A-Z]{3}$"}},
        "required": ["amount", "from", "to"], "additionalProperties": False}}},
]
TOOL_PROMPTS = ["What is the weather in Paris?", "Is it cold in Oslo today, in fahrenheit?",
                "Set a timer for 10 minutes for the pasta.", "Remind me in an hour.",
                "How much is 50 US dollars in euros?", "Convert 1200 JPY to GBP.", "Will it rain in Tokyo?",
                "Start a 3 minute timer called tea.", "I need 300 euros in Swiss francs.", "Hello! What can you do?"]


@pytest.mark.slow
def test_tool_choice_required_yields_a_valid_call_20_times(server):
    """The issue's bar: 20 ``tool_choice="required"`` requests (10 prompts, greedy and sampled with a seed) through
    webinfer.OpenAI's client (``Client.load``) on SmolLM2: each answer is one call of a given tool, with arguments
    that validate against that tool's JSON Schema (`jsonschema`)."""
    import jsonschema

    client, _ = server
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    failures, names = [], []
    for i, prompt in enumerate(TOOL_PROMPTS * 2):
        sampled = {"temperature": 0.8, "top_p": 0.95, "seed": i} if i >= len(TOOL_PROMPTS) else {"temperature": 0}
        reply = client.chat.completions.create(messages=[{"role": "user", "content": prompt}], tools=TOOLS,
                                               tool_choice="required", max_tokens=70, **sampled)
        choice = reply.choices[0]
        calls = getattr(choice.message, "tool_calls", None) or []
        print(f"\n{i}: {choice.finish_reason} {[(c.function.name, c.function.arguments) for c in calls]}")
        try:
            assert choice.finish_reason == "tool_calls" and len(calls) == 1, choice
            assert calls[0].type == "function" and calls[0].function.name in by_name, calls[0]
            names.append(calls[0].function.name)
            jsonschema.validate(json.loads(calls[0].function.arguments), by_name[calls[0].function.name])
        except (AssertionError, ValueError, jsonschema.ValidationError) as e:
            failures.append(f"{i} {prompt!r}: {str(e)[:300]}")
    print(f"\n{20 - len(failures)}/20 valid calls; tools called: {sorted(set(names))}")
    assert not failures, "\n".join(failures)
