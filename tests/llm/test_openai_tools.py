"""The API's text logic without a GPU: tools offered through the model's template (checked against
transformers' ``apply_chat_template(tools=...)``) or in the Hermes form, tool calls parsed from scripted replies
into OpenAI's shape (whole and streamed), stop strings held back across token boundaries (checked against
``str.find`` on the whole text), and one-line refusals."""

from __future__ import annotations

import json
import random

import pytest

from webinfer.errors import WebinferError
from webinfer.llm.api_request import parse_chat_request
from webinfer.llm.generate import Token
from webinfer.llm.openai_api import Client
from webinfer.llm.tokenizer import Tokenizer
from webinfer.llm.tool_calls import StopScanner, parse_tool_calls

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}},
         {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {
             "a": {"type": "number"}, "b": {"type": "number"}}}}}]
ASK = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}]
# A template that renders tools itself (the shape of Qwen 2.5's), to compare with transformers.
TOOL_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\n{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] }}"
    "{% else %}You are a helpful assistant.{% endif %}\n\n# Tools\n<tools>{%- for tool in tools %}\n{{ tool | tojson }}"
    "{%- endfor %}\n</tools><|im_end|>\n{% endif %}{%- for message in messages %}{% if not (tools and "
    "message.role == 'system') %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endif %}"
    "{%- endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


class Scripted:
    """A stand-in for a Generator whose replies are fixed text pieces (one token each): the API's event logic
    is tested on known replies; prompts are rendered with the real tokenizer."""

    def __init__(self, tokenizer: Tokenizer, pieces: list[str], eos: bool = True):
        self.tokenizer, self.pieces, self.max_seq, self.stats, self.eos = tokenizer, pieces, 4096, {}, eos
        self.prompt_text = None

    def prompt_ids(self, text: str) -> list[int]:
        self.prompt_text = text
        return self.tokenizer.encode(text)

    async def agenerate(self, ids, **options):
        out: list[int] = []
        self.stats = {"prompt_ids": list(ids), "token_ids": out}
        for i, piece in enumerate(self.pieces[:options["max_new_tokens"]]):
            out.append(1000 + i)
            yield Token(1000 + i, piece)
        if self.eos and len(self.pieces) < options["max_new_tokens"]:
            out.append(self.tokenizer.eos_token_id)
            yield Token(self.tokenizer.eos_token_id, "")


@pytest.fixture(scope="module")
def smol_tokenizer(tokenizer_dir):
    return Tokenizer.from_file(tokenizer_dir / "tokenizer.json", tokenizer_dir / "tokenizer_config.json")


def test_tool_call_parsed_whole_and_streamed(smol_tokenizer):
    reply = ["I will check. ", "<tool", "_call>\n{\"name\": \"get_weather\", ", "\"arguments\": {\"city\": \"Paris\"}}",
             "\n</tool_call>"]
    gen = Scripted(smol_tokenizer, reply)
    client = Client(gen, model="m")
    r = client.chat.completions.create(messages=ASK, tools=TOOLS, temperature=0)
    # SmolLM2-135M's template has no tools: they are offered in the Hermes form, in the system message
    assert gen.prompt_text.startswith("<|im_start|>system\nBe brief.\n\nYou are a function calling AI model.")
    assert json.dumps(TOOLS[0], ensure_ascii=False) in gen.prompt_text
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content == "I will check. "
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"} and call.id.startswith("call-")
    chunks = list(client.chat.completions.create(messages=ASK, tools=TOOLS, temperature=0, stream=True))
    text = "".join(c.choices[0].delta.get("content") or "" for c in chunks)
    calls = [tc for c in chunks for tc in c.choices[0].delta.get("tool_calls") or []]
    assert text == "I will check. " and chunks[-1].choices[0].finish_reason == "tool_calls"
    assert [(tc["index"], tc["function"]["name"], json.loads(tc["function"]["arguments"])) for tc in calls] == [
        (0, "get_weather", {"city": "Paris"})]
    # a reply naming no given tool is plain content
    r = Client(Scripted(smol_tokenizer, ["<tool_call>{\"name\": \"rm\", \"arguments\": {}}</tool_call>"])).chat.\
        completions.create(messages=ASK, tools=TOOLS)
    assert r.choices[0].finish_reason == "stop" and "tool_calls" not in r.choices[0].message
    assert r.choices[0].message.content.startswith("<tool_call>")


def test_tool_call_formats():
    names = {"get_weather", "add"}
    ids = iter(range(100))
    new_id = lambda: f"c{next(ids)}"  # noqa: E731
    smol = '<tool_call>[{"name": "add", "arguments": {"a": 1, "b": 2}}, {"name": "get_weather", "arguments": ' \
           '{"city": "Oslo"}}]</tool_call>'
    content, calls = parse_tool_calls(smol, names, new_id)
    assert content is None and [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("add", {"a": 1, "b": 2}), ("get_weather", {"city": "Oslo"})]
    two = '<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>\n<tool_call>\n{"name": "add", ' \
          '"arguments": "{\\"a\\": 2}"}\n</tool_call>'
    assert [json.loads(c["function"]["arguments"]) for c in parse_tool_calls(two, names, new_id)[1]] == [{"a": 1},
                                                                                                        {"a": 2}]
    llama = '{"name": "get_weather", "parameters": {"city": "Rome"}}'
    assert json.loads(parse_tool_calls(llama, names, new_id)[1][0]["function"]["arguments"]) == {"city": "Rome"}
    for text in ('{"name": "nope", "arguments": {}}', "<tool_call>{not json}</tool_call>", "plain words",
                 '{"city": "Rome"}'):
        assert parse_tool_calls(text, names, new_id) == (text, [])


def test_tools_go_through_a_template_that_takes_them(smol_tokenizer, tokenizer_dir):
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer.from_json((tokenizer_dir / "tokenizer.json").read_text(),
                              json.dumps({"chat_template": TOOL_TEMPLATE, "eos_token": "<|im_end|>"}))
    gen = Scripted(tok, ["Sunny."])
    Client(gen).chat.completions.create(messages=ASK, tools=TOOLS)
    hf = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_dir / "tokenizer.json"), chat_template=TOOL_TEMPLATE)
    want = hf.apply_chat_template(ASK, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    assert gen.prompt_text == want and "<tools>" in want


def test_stop_strings_held_back_across_tokens():
    rng = random.Random(7)
    text = "alpha beta\n\ngamma END delta ENDING epsilon"
    for stops in (["END"], ["\n\n"], ["ENDING", "a E"], ["zzz"], ["ta\n"]):
        hits = [text.find(s) for s in stops if s in text]
        want = text[:min(hits)] if hits else text
        for _ in range(30):
            cuts = sorted(rng.sample(range(1, len(text)), rng.randint(1, 12)))
            pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
            scanner, out, stopped = StopScanner(stops), "", None
            for p in pieces:
                emitted, stopped = scanner.push(p)
                out += emitted
                if stopped:
                    break
            if not stopped:
                out += scanner.flush()
            assert out == want, (stops, pieces)


def test_stop_string_ends_a_completion(smol_tokenizer):
    gen = Scripted(smol_tokenizer, ["Red", ", gr", "een,", " blue", "."])
    r = Client(gen).chat.completions.create(messages=ASK, stop=["n, b"], max_tokens=10)
    assert r.choices[0].message.content == "Red, gree" and r.choices[0].finish_reason == "stop"
    assert r.usage.completion_tokens == 4  # generation stopped at the token completing the stop string
    r = Client(Scripted(smol_tokenizer, ["a", "b", "c"])).chat.completions.create(messages=ASK, max_tokens=2)
    assert r.choices[0].message.content == "ab" and r.choices[0].finish_reason == "length"
    # a generation that ends before its budget without an EOS (a finished constraint): "stop"
    r = Client(Scripted(smol_tokenizer, ["{}"], eos=False)).chat.completions.create(messages=ASK, max_tokens=5)
    assert r.choices[0].message.content == "{}" and r.choices[0].finish_reason == "stop"


@pytest.mark.parametrize("body, words", [
    ({"n": 3}, "n must be 1"), ({"logit_bias": {"x": 5}}, "not a token id"),
    ({"logit_bias": {"1": 500}}, "[-100, 100]"), ({"top_logprobs": 3}, "needs logprobs"),
    ({"logprobs": True, "top_logprobs": 30}, "0..20"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop must be"), ({"tools": [{"type": "function"}]}, "tools[0]"),
    ({"tool_choice": "required"}, "needs tools"), ({"frobnicate": 1}, "unsupported parameter(s): frobnicate"),
    ({"messages": [{"role": "wizard", "content": "x"}]}, "role"), ({"top_p": 1.5}, "top_p"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "not one of the tools"),
    ({"response_format": {"type": "xml"}}, "response_format")])
def test_requests_refused_in_one_line(body, words):
    with pytest.raises(WebinferError) as info:
        parse_chat_request({"messages": [{"role": "user", "content": "hi"}], **body})
    assert words in str(info.value) and "\n" not in str(info.value)

