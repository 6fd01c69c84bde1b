"""Tools for the OpenAI-shaped API: the prompt that offers them, the calls parsed back, stop strings.

Offering tools. When the model's chat template knows about tools (its source reads ``tools``) and jinja2
is here, the template renders them itself (``tools=`` as transformers' ``apply_chat_template`` passes it),
and ``assistant`` messages with ``tool_calls`` and ``tool`` messages go to it unchanged. Otherwise (a
template without tools, such as SmolLM2-135M's, or the browser, where templates render from the build's
precomputed format) the tools are offered in the Hermes / Qwen 2.5 wording, the one SmolLM2 and Qwen were
trained on, as a system message (merged into the conversation's own system message); earlier calls become
``<tool_call>`` text and tool results ``<tool_response>`` text in a user turn, as Qwen's template writes them.

Calls parsed from the output (``parse_tool_calls``), documented formats:
- Hermes / Qwen 2.5 / SmolLM2: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, repeated for
  several calls; the JSON inside one tag may also be a list of such objects (SmolLM2's own form);
- a whole reply that is only such a JSON object or list (Llama 3.1's JSON tool calls: ``"parameters"`` is
  read as ``"arguments"``), when every name is one of the given tools.
Text before the first ``<tool_call>`` stays the message's content. Standard library only.
"""

from __future__ import annotations

import json
import re

from ..errors import WebinferError

OPEN, CLOSE = "<tool_call>", "</tool_call>"

HERMES_PROMPT = (
    "You are a function calling AI model. You are provided with function signatures within <tools></tools> "
    "XML tags. You may call one or more functions to assist with the user query. Don't make assumptions about "
    "what values to plug into functions. Here are the available tools: <tools>\n{tools}\n</tools>\n"
    "For each function call, return a json object with function name and arguments within <tool_call>"
    "</tool_call> XML tags:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": <args-json-object>}}\n"
    "</tool_call>")


def template_takes_tools(template: str | None) -> bool:
    """Whether a chat template reads a ``tools`` variable (then it is given the tools, else our prompt is)."""
    return bool(template) and re.search(r"\btools\b", template) is not None


def hermes_messages(messages: list[dict], tools: list[dict] | None) -> list[dict]:
    """``messages`` with the tools offered in a system message and tool traffic as plain text (for templates
    that know only system/user/assistant)."""
    out: list[dict] = []
    if tools:
        listing = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
        offer = HERMES_PROMPT.format(tools=listing)
        if messages and messages[0]["role"] == "system":
            offer = messages[0]["content"] + "\n\n" + offer
            messages = messages[1:]
        out.append({"role": "system", "content": offer})
    for m in messages:
        if m["role"] == "assistant" and m.get("tool_calls"):
            calls = "\n".join(f"{OPEN}\n" + json.dumps({"name": c["function"]["name"],
                                                        "arguments": _arguments(c["function"].get("arguments"))},
                                                       ensure_ascii=False) + f"\n{CLOSE}" for c in m["tool_calls"])
            text = (m.get("content") or "") + ("\n" if m.get("content") else "") + calls
            out.append({"role": "assistant", "content": text})
        elif m["role"] == "tool":
            reply = f"<tool_response>\n{m.get('content') or ''}\n</tool_response>"
            if out and out[-1]["role"] == "user" and out[-1].get("_tool"):  # consecutive results: one turn
                out[-1]["content"] += "\n" + reply
            else:
                out.append({"role": "user", "content": reply, "_tool": True})
        else:
            out.append({"role": m["role"], "content": m.get("content") or ""})
    return [{k: v for k, v in m.items() if k != "_tool"} for m in out]


def _arguments(value):
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value if value is not None else {}


def parse_tool_calls(text: str, tool_names: set[str], call_id) -> tuple[str | None, list[dict]]:
    """(content, tool_calls) of a reply: OpenAI-shaped calls ``{id, type: "function", function: {name,
    arguments: JSON text}}``; (the text, []) when it holds no well-formed call."""
    calls: list[dict] = []
    if OPEN in text:
        content, rest = text.split(OPEN, 1)
        for body in (OPEN + rest).split(OPEN)[1:]:
            body = body.split(CLOSE, 1)[0].strip()
            calls += _calls_in(body)
        if calls and all(c["name"] in tool_names for c in calls):
            return (content.strip() or None), [_shape(c, call_id) for c in calls]
        return text, []
    stripped = text.strip()
    if stripped[:1] in "{[" and stripped:
        calls = _calls_in(stripped)
        if calls and all(c["name"] in tool_names for c in calls):
            return None, [_shape(c, call_id) for c in calls]
    return text, []


def _calls_in(body: str) -> list[dict]:
    try:
        value = json.loads(body)
    except ValueError:
        return []
    items = value if isinstance(value, list) else [value]
    calls = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return []
        args = item.get("arguments", item.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                return []
        if not isinstance(args, dict):
            return []
        calls.append({"name": item["name"], "arguments": args})
    return calls


def _shape(call: dict, call_id) -> dict:
    return {"id": call_id(), "type": "function",
            "function": {"name": call["name"], "arguments": json.dumps(call["arguments"], ensure_ascii=False)}}


def check_tools(tools) -> list[dict]:
    """OpenAI's ``tools``: a list of ``{"type": "function", "function": {"name", "description"?, "parameters"?}}``."""
    if not isinstance(tools, list) or not tools:
        raise WebinferError("tools must be a non-empty list of {type: 'function', function: {name, parameters}}")
    names = set()
    for i, t in enumerate(tools):
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(fn, dict) \
                or not isinstance(fn.get("name"), str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", fn["name"]):
            raise WebinferError(f"tools[{i}] must be {{type: 'function', function: {{name: [A-Za-z0-9_-]{{1,64}}, "
                                "parameters}}")
        if "parameters" in fn and not isinstance(fn["parameters"], dict):
            raise WebinferError(f"tools[{i}].function.parameters must be a JSON Schema object")
        if fn["name"] in names:
            raise WebinferError(f"tools[{i}]: the name {fn['name']!r} is given twice")
        names.add(fn["name"])
    return tools


class StopScanner:
    """Streams text while watching for stop strings: text that could be the start of one is held back until
    it is known not to be. ``push`` returns (text safe to emit, the stop string found or None); the text
    before the stop string is emitted, the stop string and what follows are not (as OpenAI trims them)."""

    def __init__(self, stops: list[str]):
        self.stops = [s for s in stops if s]
        self.held = ""
        self.rest = ""  # the text after the stop string found

    def push(self, text: str) -> tuple[str, str | None]:
        self.held += text
        if not self.stops:
            out, self.held = self.held, ""
            return out, None
        hits = sorted((self.held.find(s), -len(s), s) for s in self.stops if s in self.held)
        if hits:
            at, _, hit = hits[0]
            out, self.rest, self.held = self.held[:at], self.held[at + len(hit):], ""
            return out, hit
        keep = 0  # the longest tail of the held text that begins some stop string
        for s in self.stops:
            for n in range(min(len(s) - 1, len(self.held)), keep, -1):
                if self.held.endswith(s[:n]):
                    keep = n
                    break
        out, self.held = self.held[:len(self.held) - keep], self.held[len(self.held) - keep:]
        return out, None

    def flush(self) -> str:
        out, self.held = self.held, ""
        return out
