"""One chat completion, as OpenAI's API answers it: the prompt (the model's template, tools offered as
tool_calls.py says), the generation with stop strings, tool calls, logit_bias and logprobs, and the answer
whole (``completion``) or as chunks (``completion_chunks``). Used by openai_api.py (Python, the page) and
serve_api.py (HTTP). Standard library only.
"""

from __future__ import annotations

import itertools
import random
import time

from ..errors import WebinferError
from . import chat_template
from .api_request import ChatRequest
from .tool_calls import OPEN, StopScanner, hermes_messages, parse_tool_calls, template_takes_tools

_ids = itertools.count(1)


def _new_id(prefix: str) -> str:
    return f"{prefix}-{int(time.time() * 1000):x}{next(_ids):04x}{random.getrandbits(24):06x}"


def prompt_ids(generator, req: ChatRequest) -> list[int]:
    """The conversation (and the tools offered) rendered with the model's own chat template, as token ids."""
    tok = generator.tokenizer
    if tok is None:
        raise WebinferError("the artifact has no tokenizer: chat completions need one")
    tools = req.tools if req.tools_offered else None
    template = chat_template.template_of(tok.config)
    if template_takes_tools(template) and chat_template.jinja_available():
        text = chat_template.render_jinja(template, req.messages, True, chat_template.special_tokens(tok.config),
                                          tools=tools)
    else:
        text = tok.apply_chat_template(hermes_messages(req.messages, tools), add_generation_prompt=True,
                                       tokenize=False)
    return generator.prompt_ids(text)


def constraint_for(req: ChatRequest, tokenizer):
    """The decoding constraint a request needs (None for free text); the one seam to webinfer.llm.constrain."""
    if not req.constrained:
        return None
    from .constrain import json_schema_constraint

    if req.forced_tool:
        tools = req.tools if req.tool_choice == "required" else [
            t for t in req.tools if t["function"]["name"] == req.tool_choice["function"]["name"]]
        schema = {"anyOf": [{"type": "object", "properties": {
            "name": {"const": t["function"]["name"]},
            "arguments": t["function"].get("parameters") or {"type": "object"}},
            "required": ["name", "arguments"], "additionalProperties": False} for t in tools]}
    elif req.response_format["type"] == "json_object":
        schema = {"type": "object"}
    else:
        schema = req.response_format["json_schema"]["schema"]
    return json_schema_constraint(schema, tokenizer)


def _logit_options(generator, req: ChatRequest):
    """The generator's logit_bias / logprobs settings for this request (llm/logit_options.py), or None."""
    opts = getattr(generator, "logit_options", None)
    if opts is None:
        if req.logit_bias or req.top_logprobs is not None:
            raise WebinferError("this generator cannot apply logit_bias or report logprobs")
        return None
    opts.configure(req.logit_bias, req.top_logprobs)
    return opts


async def chat_events(generator, req: ChatRequest):
    """Run one request: yields ("text", str) as it streams, ("logprobs", [entry, ...]) before the text of those
    tokens (when asked for), ("tool_calls", [...]), then ("end", finish_reason, usage). Text that may begin a
    stop string or a tool call is held back until it is known not to."""
    ids = prompt_ids(generator, req)
    constraint = constraint_for(req, generator.tokenizer)
    room = generator.max_seq - len(ids)
    if room < 1 or (req.max_tokens or 0) > room:
        raise WebinferError(f"the prompt ({len(ids)} tokens) + max_tokens ({req.max_tokens or 1}) exceed the KV cache "
                            f"of {generator.max_seq} positions")
    options = {"max_new_tokens": req.max_tokens or room, "temperature": req.temperature, "top_k": req.top_k,
               "top_p": req.top_p, "repetition_penalty": req.repetition_penalty,
               "seed": random.getrandbits(32) if req.seed is None else req.seed}
    if constraint is not None:
        options["constraint"] = constraint
    watch_tools = req.tools_offered and not req.forced_tool
    scanner = StopScanner(req.stop + ([OPEN] if watch_tools else []))
    tail_stops = StopScanner(req.stop)
    tail = None  # the text from the first <tool_call> on, held until the end
    held = [] if req.forced_tool else None  # a forced call is parsed whole
    finish = None
    opts = _logit_options(generator, req)
    want_lp = opts is not None and opts.k is not None
    pending: list[dict] = []  # logprobs entries of the tokens whose text is not out yet
    decode = lambda t: generator.tokenizer.decode([t])  # noqa: E731
    agen = generator.agenerate(ids, **options)
    try:
        async for tok in agen:
            if want_lp and opts.results:
                pending.append(opts.entry(tok.id, opts.results[-1], decode))
            if held is not None:
                held.append(tok.text)
                continue
            if tail is not None:
                part, hit = tail_stops.push(tok.text)
                tail += part
                if hit:
                    finish = "stop"
                    break
                continue
            out, hit = scanner.push(tok.text)
            if out:
                if pending:
                    yield ("logprobs", pending)
                    pending = []
                yield ("text", out)
            if hit == OPEN and OPEN not in req.stop:
                tail = OPEN
                part, hit = tail_stops.push(scanner.rest)
                tail += part
            if hit and hit != OPEN or hit == OPEN and OPEN in req.stop:
                finish = "stop"
                break
    finally:
        await agen.aclose()
        if opts is not None:
            opts.reset()
    if pending:
        yield ("logprobs", pending)
    names = {t["function"]["name"] for t in req.tools or []}
    if held is not None:
        _, calls = parse_tool_calls("".join(held), names, lambda: _new_id("call"))
        if calls:
            yield ("tool_calls", calls)
            finish = "tool_calls"
        elif len(generator.stats.get("token_ids", [])) >= options["max_new_tokens"]:
            yield ("text", "".join(held))  # the call was cut by max_tokens: finish_reason "length", as OpenAI
        else:
            raise WebinferError("the model's output is not a call of one of the tools")
    elif tail is not None:
        tail += tail_stops.flush()
        content, calls = parse_tool_calls(tail, names, lambda: _new_id("call"))
        if calls:
            if content:
                yield ("text", content)
            yield ("tool_calls", calls)
            finish = "tool_calls"
        else:
            yield ("text", tail)
    elif finish is None:
        rest = scanner.flush()
        if rest:
            yield ("text", rest)
    stats = generator.stats
    out_ids = stats.get("token_ids", [])
    if finish is None:  # "length" only when the token budget ran out (not at an EOS, a finished constraint...)
        eos = generator.tokenizer.eos_token_id
        full = len(out_ids) >= options["max_new_tokens"] and not (out_ids and out_ids[-1] == eos)
        finish = "length" if full and not stats.get("cancelled") else "stop"
    usage = {"prompt_tokens": len(ids), "completion_tokens": len(out_ids), "total_tokens": len(ids) + len(out_ids)}
    yield ("end", finish, usage)


def _logprobs(req: ChatRequest, entries: list[dict]) -> dict | None:
    return None if req.top_logprobs is None else {"content": entries, "refusal": None}


def _timing(stats: dict) -> dict:
    return {k: stats.get(k) for k in ("ttft_s", "prefill_tok_s", "decode_tok_s", "reused_tokens")}


async def completion(generator, req: ChatRequest, model: str) -> dict:
    """A whole ``chat.completion`` object."""
    text, calls, finish, usage, logprobs = [], None, "stop", None, []
    async for event in chat_events(generator, req):
        if event[0] == "text":
            text.append(event[1])
        elif event[0] == "logprobs":
            logprobs += event[1]
        elif event[0] == "tool_calls":
            calls = event[1]
        else:
            finish, usage = event[1], event[2]
    message = {"role": "assistant", "content": "".join(text) or (None if calls else ""), "refusal": None}
    if calls:
        message["tool_calls"] = calls
    return {"id": _new_id("chatcmpl"), "object": "chat.completion", "created": int(time.time()), "model": model,
            "system_fingerprint": "webinfer", "choices": [{"index": 0, "message": message, "finish_reason": finish,
                                                           "logprobs": _logprobs(req, logprobs)}],
            "usage": usage, "webinfer": _timing(generator.stats)}


async def completion_chunks(generator, req: ChatRequest, model: str):
    """``chat.completion.chunk`` objects: the role, content deltas, tool-call deltas, the finish reason, and
    with ``stream_options.include_usage`` a last chunk holding ``usage`` (no choices), as OpenAI streams."""
    head = {"id": _new_id("chatcmpl"), "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model, "system_fingerprint": "webinfer"}

    def chunk(delta: dict, finish=None, logprobs=None) -> dict:
        c = {**head, "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]}
        if req.include_usage:
            c["usage"] = None
        return c

    events = chat_events(generator, req)
    first = await events.__anext__()  # (a request the model cannot take fails before any chunk)
    yield chunk({"role": "assistant", "content": ""})
    event, pending = first, []
    try:
        while True:
            if event[0] == "logprobs":
                pending += event[1]
            elif event[0] == "text":
                yield chunk({"content": event[1]}, logprobs=_logprobs(req, pending))
                pending = []
            elif event[0] == "tool_calls":
                yield chunk({"tool_calls": [{"index": i, **c} for i, c in enumerate(event[1])]})
            else:
                if pending:  # tokens whose text never came out (a stop string, special tokens)
                    yield chunk({"content": ""}, logprobs=_logprobs(req, pending))
                yield chunk({}, event[1])
                if req.include_usage:
                    yield {**head, "choices": [], "usage": event[2], "webinfer": _timing(generator.stats)}
                return
            event = await events.__anext__()
    finally:
        await events.aclose()
