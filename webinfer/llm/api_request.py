"""An OpenAI ``chat.completions.create`` request, checked: what webinfer honours, and one line for the rest.

Parameters follow OpenAI's meaning and defaults (temperature 1, top_p 1, n 1; ``max_tokens`` or
``max_completion_tokens`` default to what the KV cache has left). ``top_k`` and ``repetition_penalty`` are
accepted as extras (as vLLM does). ``logit_bias`` and ``logprobs``/``top_logprobs`` run on the GPU
(llm/logit_options.py). Refused with one line rather than ignored: ``n`` > 1, non-zero ``presence_penalty`` /
``frequency_penalty``, audio and image content. Standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import WebinferError
from .logit_options import TOP, parse_logit_bias
from .tool_calls import check_tools

# Keys clients send that change nothing here (bookkeeping, or options with a single possible value).
_IGNORED = {"user", "metadata", "store", "service_tier", "parallel_tool_calls", "modalities", "reasoning_effort",
            "prediction", "web_search_options", "safety_identifier", "prompt_cache_key", "verbosity"}
ROLES = ("system", "developer", "user", "assistant", "tool")


@dataclass
class ChatRequest:
    messages: list[dict]
    model: str | None = None
    stream: bool = False
    include_usage: bool = False
    max_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    repetition_penalty: float = 1.0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    tools: list[dict] | None = None
    tool_choice: object = "auto"  # "auto" | "none" | "required" | {"type": "function", "function": {"name"}}
    response_format: dict | None = None
    logit_bias: dict[int, float] | None = None
    top_logprobs: int | None = None  # None: no logprobs; 0..20 with logprobs=true

    @property
    def tools_offered(self) -> bool:
        return bool(self.tools) and self.tool_choice != "none"

    @property
    def forced_tool(self) -> bool:
        return self.tools_offered and self.tool_choice != "auto"

    @property
    def constrained(self) -> bool:
        fmt = (self.response_format or {}).get("type", "text")
        return self.forced_tool or fmt != "text"


def parse_chat_request(body: dict) -> ChatRequest:
    """Check a request's fields (a JSON body, or ``create``'s keyword arguments)."""
    if not isinstance(body, dict):
        raise WebinferError("the request must be a JSON object")
    known = set(ChatRequest.__dataclass_fields__) | _IGNORED | {
        "n", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "stream_options",
        "max_completion_tokens"}
    known.discard("include_usage")
    unknown = sorted(k for k in body if k not in known)
    if unknown:
        raise WebinferError(f"unsupported parameter(s): {', '.join(unknown)}")
    req = ChatRequest(messages=_messages(body.get("messages")))
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise WebinferError("model must be a string")
    req.model = model
    req.stream = _bool(body, "stream", False)
    opts = body.get("stream_options")
    if opts is not None:
        if not isinstance(opts, dict) or set(opts) - {"include_usage", "include_obfuscation"}:
            raise WebinferError("stream_options must be {include_usage: bool}")
        req.include_usage = _bool(opts, "include_usage", False)
    if _given(body, "n") and body["n"] != 1:
        raise WebinferError("n must be 1: webinfer generates one choice per request")
    for key in ("presence_penalty", "frequency_penalty"):
        if _given(body, key) and body[key] != 0:
            raise WebinferError(f"{key} is not supported (use repetition_penalty)")
    if _given(body, "logit_bias"):
        req.logit_bias = parse_logit_bias(body["logit_bias"]) or None
    logprobs = _bool(body, "logprobs", False)
    if _given(body, "top_logprobs"):
        top = body["top_logprobs"]
        if not logprobs:
            raise WebinferError("top_logprobs needs logprobs: true")
        if not isinstance(top, int) or isinstance(top, bool) or not 0 <= top <= TOP:
            raise WebinferError(f"top_logprobs must be an integer in 0..{TOP}")
    req.top_logprobs = (body.get("top_logprobs") or 0) if logprobs else None
    tokens = [body[k] for k in ("max_completion_tokens", "max_tokens") if _given(body, k)]
    if tokens:
        if not isinstance(tokens[0], int) or isinstance(tokens[0], bool) or tokens[0] < 1:
            raise WebinferError("max_tokens must be an integer >= 1")
        req.max_tokens = tokens[0]
    req.temperature = _number(body, "temperature", 1.0, 0.0, 2.0)
    req.top_p = _number(body, "top_p", 1.0, 0.0, 1.0)
    if req.top_p == 0.0:
        req.temperature = 0.0  # nothing but the most likely token is kept
        req.top_p = 1.0
    req.repetition_penalty = _number(body, "repetition_penalty", 1.0, 0.0, math.inf)
    if _given(body, "top_k"):
        if not isinstance(body["top_k"], int) or isinstance(body["top_k"], bool) or body["top_k"] < -1:
            raise WebinferError("top_k must be an integer >= 0 (0 or -1: off)")
        req.top_k = max(body["top_k"], 0)
    if _given(body, "seed"):
        seed = body["seed"]
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise WebinferError("seed must be an integer")
        req.seed = seed % 2**32  # OpenAI takes any 64-bit integer; the sampler's seed is 32 bits
    req.stop = _stops(body.get("stop"))
    if _given(body, "tools"):
        req.tools = check_tools(body["tools"])
    req.tool_choice = _tool_choice(body.get("tool_choice"), req.tools)
    fmt = body.get("response_format")
    if fmt is not None:
        if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object", "json_schema"):
            raise WebinferError("response_format must be {type: 'text' | 'json_object' | 'json_schema', ...}")
        if fmt["type"] == "json_schema" and not isinstance((fmt.get("json_schema") or {}).get("schema"), dict):
            raise WebinferError("response_format json_schema needs {json_schema: {name, schema: {...}}}")
        req.response_format = fmt
    if req.forced_tool and fmt is not None and fmt.get("type") != "text":
        raise WebinferError("tool_choice 'required' or a named tool cannot be combined with a JSON response_format")
    return req


def _given(body: dict, key: str) -> bool:
    return body.get(key) is not None


def _bool(body: dict, key: str, default: bool) -> bool:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise WebinferError(f"{key} must be true or false")
    return value


def _number(body: dict, key: str, default: float, lo: float, hi: float) -> float:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (lo <= value <= hi):
        raise WebinferError(f"{key} must be a number in [{lo:g}, {hi:g}], got {value!r}")
    return float(value)


def _stops(stop) -> list[str]:
    if stop is None:
        return []
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or len(stops) > 4 or not all(isinstance(s, str) and s for s in stops):
        raise WebinferError("stop must be a non-empty string or a list of up to 4 non-empty strings")
    return stops


def _tool_choice(choice, tools):
    if choice is None:
        return "auto" if tools else "none"
    if choice in ("auto", "none", "required"):
        if choice == "required" and not tools:
            raise WebinferError("tool_choice 'required' needs tools")
        return choice
    name = ((choice.get("function") or {}).get("name") if isinstance(choice, dict) else None)
    if not isinstance(choice, dict) or choice.get("type") != "function" or not isinstance(name, str):
        raise WebinferError("tool_choice must be 'auto', 'none', 'required' or {type: 'function', function: {name}}")
    if name not in {t["function"]["name"] for t in tools or []}:
        raise WebinferError(f"tool_choice names {name!r}, which is not one of the tools")
    return choice


def _messages(messages) -> list[dict]:
    """OpenAI messages as {role, content: str, ...}: text parts joined, ``developer`` read as ``system``."""
    if not isinstance(messages, list) or not messages:
        raise WebinferError("messages must be a non-empty list of {role, content} objects")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise WebinferError(f"messages[{i}] must be an object whose role is one of {', '.join(ROLES)}")
        content = m.get("content")
        if isinstance(content, list):
            parts = []
            for p in content:
                if not isinstance(p, dict) or p.get("type") != "text" or not isinstance(p.get("text"), str):
                    raise WebinferError(f"messages[{i}]: only text content parts are supported")
                parts.append(p["text"])
            content = "".join(parts)
        calls = m.get("tool_calls")
        if content is None and not (m["role"] == "assistant" and calls):
            raise WebinferError(f"messages[{i}] has no content")
        if content is not None and not isinstance(content, str):
            raise WebinferError(f"messages[{i}].content must be a string or a list of text parts")
        msg = {"role": "system" if m["role"] == "developer" else m["role"], "content": content}
        if calls:
            if not isinstance(calls, list) or not all(isinstance(c, dict) and isinstance(c.get("function"), dict)
                                                      and isinstance(c["function"].get("name"), str) for c in calls):
                raise WebinferError(f"messages[{i}].tool_calls must be a list of {{id, type, function: {{name, "
                                    "arguments}}}}")
            msg["tool_calls"] = calls
        if m["role"] == "tool":
            msg["tool_call_id"] = m.get("tool_call_id")
        if isinstance(m.get("name"), str):
            msg["name"] = m["name"]
        out.append(msg)
    return out
