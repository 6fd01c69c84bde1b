"""An OpenAI-shaped API over webinfer's artifacts, the same natively, over HTTP (serve_api.py) and in a page.

    client = webinfer.OpenAI("smollm2.wi", embeddings="minilm.wi")
    r = client.chat.completions.create(messages=[{"role": "user", "content": "Hi!"}], temperature=0)
    r.choices[0].message.content, r.usage.completion_tokens, r.choices[0].finish_reason
    for chunk in client.chat.completions.create(messages=..., stream=True):
        print(chunk.choices[0].delta.content or "", end="")
    client.embeddings.create(input=["a", "b"]).data[0].embedding

Results are dicts shaped as OpenAI's JSON (``id``, ``object``, ``created``, ``model``, ``choices``,
``usage``...), readable as attributes too. Requests are checked by api_request.py (unsupported parameters
get one line); tools are offered and calls parsed as tool_calls.py says. ``response_format`` json_object /
json_schema and a forced tool (``tool_choice`` "required" or named) need constrained decoding
(``webinfer.llm.constrain``), connected in one place: ``constraint_for``. Pyodide: ``acreate``. Standard library.
"""

from __future__ import annotations

import itertools
import random
import time

from ..errors import WebinferError
from ..runtime.session import run_sync
from . import chat_template
from .api_request import ChatRequest, parse_chat_request
from .tool_calls import OPEN, StopScanner, hermes_messages, parse_tool_calls, template_takes_tools

_ids = itertools.count(1)


class Record(dict):
    """A JSON object whose keys read as attributes too (``r.choices[0].message.content``)."""

    def __getattr__(self, key):
        try:
            return _records(self[key])
        except KeyError:
            raise AttributeError(key) from None


def _records(value):
    if isinstance(value, dict) and not isinstance(value, Record):
        return Record(value)
    if isinstance(value, list):
        return [_records(v) for v in value]
    return value


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
    try:
        from .constrain import json_schema_constraint
    except ImportError:
        raise WebinferError("constrained decoding is not available in this build (needed by response_format "
                            "json_object/json_schema and tool_choice 'required' or a named tool)") from None
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


async def chat_events(generator, req: ChatRequest):
    """Run one request: yields ("text", str) as it streams, ("tool_calls", [...]), then ("end", finish_reason,
    usage). Text that may begin a stop string or a tool call is held back until it is known not to."""
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
    agen = generator.agenerate(ids, **options)
    try:
        async for tok in agen:
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
    names = {t["function"]["name"] for t in req.tools or []}
    if held is not None:
        _, calls = parse_tool_calls("".join(held), names, lambda: _new_id("call"))
        if not calls:
            raise WebinferError("the model's output is not a call of one of the tools")
        yield ("tool_calls", calls)
        finish = "tool_calls"
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
    if finish is None:
        eos = generator.tokenizer.eos_token_id
        finish = "stop" if (out_ids and out_ids[-1] == eos) or stats.get("cancelled") else "length"
    usage = {"prompt_tokens": len(ids), "completion_tokens": len(out_ids), "total_tokens": len(ids) + len(out_ids)}
    yield ("end", finish, usage)


def _timing(stats: dict) -> dict:
    return {k: stats.get(k) for k in ("ttft_s", "prefill_tok_s", "decode_tok_s", "reused_tokens")}


async def completion(generator, req: ChatRequest, model: str) -> dict:
    """A whole ``chat.completion`` object."""
    text, calls, finish, usage = [], None, "stop", None
    async for event in chat_events(generator, req):
        if event[0] == "text":
            text.append(event[1])
        elif event[0] == "tool_calls":
            calls = event[1]
        else:
            finish, usage = event[1], event[2]
    message = {"role": "assistant", "content": "".join(text) or (None if calls else ""), "refusal": None}
    if calls:
        message["tool_calls"] = calls
    return {"id": _new_id("chatcmpl"), "object": "chat.completion", "created": int(time.time()), "model": model,
            "system_fingerprint": "webinfer", "choices": [{"index": 0, "message": message, "logprobs": None,
                                                           "finish_reason": finish}],
            "usage": usage, "webinfer": _timing(generator.stats)}


async def completion_chunks(generator, req: ChatRequest, model: str):
    """``chat.completion.chunk`` objects: the role, content deltas, tool-call deltas, the finish reason, and
    with ``stream_options.include_usage`` a last chunk holding ``usage`` (no choices), as OpenAI streams."""
    head = {"id": _new_id("chatcmpl"), "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model, "system_fingerprint": "webinfer"}

    def chunk(delta: dict, finish=None) -> dict:
        c = {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        if req.include_usage:
            c["usage"] = None
        return c

    events = chat_events(generator, req)
    first = await events.__anext__()  # (a request the model cannot take fails before any chunk)
    yield chunk({"role": "assistant", "content": ""})
    event = first
    try:
        while True:
            if event[0] == "text":
                yield chunk({"content": event[1]})
            elif event[0] == "tool_calls":
                yield chunk({"tool_calls": [{"index": i, **c} for i, c in enumerate(event[1])]})
            else:
                yield chunk({}, event[1])
                if req.include_usage:
                    yield {**head, "choices": [], "usage": event[2], "webinfer": _timing(generator.stats)}
                return
            event = await events.__anext__()
    finally:
        await events.aclose()


def _sync_iter(agen):
    """Drive an async generator that never truly suspends (native devices) as a plain iterator."""
    try:
        while True:
            try:
                yield _records(run_sync(agen.__anext__()))
            except StopAsyncIteration:
                return
    finally:
        run_sync(agen.aclose())


class Completions:
    def __init__(self, client: Client):
        self._client = client

    def _request(self, kwargs: dict) -> ChatRequest:
        req = parse_chat_request(kwargs)
        self._client.check_model(req.model, "chat")
        return req

    def create(self, **kwargs):
        """``messages`` and OpenAI's parameters; a ``chat.completion``, or with ``stream=True`` an iterator of
        chunks (native devices)."""
        req = self._request(kwargs)
        gen, model = self._client.generator, self._client.model
        if req.stream:
            return _sync_iter(completion_chunks(gen, req, model))
        return _records(run_sync(completion(gen, req, model)))

    async def acreate(self, **kwargs):
        """The same in Pyodide: a ``chat.completion``, or with ``stream=True`` an async iterator of chunks."""
        req = self._request(kwargs)
        gen, model = self._client.generator, self._client.model
        if req.stream:
            return _arecords(completion_chunks(gen, req, model))
        return _records(await completion(gen, req, model))


async def _arecords(agen):
    async for item in agen:
        yield _records(item)


class _Chat:
    def __init__(self, client: Client):
        self.completions = Completions(client)


class Embeddings:
    def __init__(self, client: Client):
        self._client = client

    def create(self, input, model: str | None = None, encoding_format: str = "float", dimensions=None, **extra):
        """Unit-length sentence embeddings of ``input`` (a string, a list of strings, or token ids)."""
        return run_sync(self.acreate(input, model, encoding_format, dimensions, **extra))

    async def acreate(self, input, model: str | None = None, encoding_format: str = "float", dimensions=None,
                      **extra):
        from .embeddings import embeddings_response

        extra.pop("user", None)
        if extra:
            raise WebinferError(f"unsupported parameter(s): {', '.join(sorted(extra))}")
        self._client.check_model(model, "embeddings")
        return _records(await embeddings_response(self._client.embedder, input, self._client.embedding_model,
                                                  encoding_format, dimensions))


class Models:
    def __init__(self, client: Client):
        self._client = client

    def list(self) -> Record:
        now = int(time.time())
        return _records({"object": "list", "data": [{"id": m, "object": "model", "created": now, "owned_by": "webinfer"}
                                                    for m in self._client.model_ids()]})


class Client:
    """The API over a generation artifact (``generator``: an llm.generate.Generator) and/or an embedding
    artifact (``embedder``: an llm.embeddings.Embedder). ``model``: the name requests and
    answers use (requests naming another model are refused)."""

    def __init__(self, generator=None, embedder=None, model: str | None = None, embedding_model: str | None = None):
        self.generator, self.embedder = generator, embedder
        self.model = model or "webinfer-chat"
        self.embedding_model = embedding_model or "webinfer-embedding"
        self.chat = _Chat(self)
        self.embeddings = Embeddings(self)
        self.models = Models(self)

    @classmethod
    def load(cls, artifact: str | None = None, embeddings: str | None = None, device=None) -> Client:
        """Open the artifacts natively (wgpu-py); each is named after its folder. An embedding artifact given as
        ``artifact`` is taken as ``embeddings``."""
        if artifact is not None and embeddings is None and not _is_generation(artifact):
            artifact, embeddings = None, artifact
        gen = emb = None
        if artifact is not None:
            from .generate import Generator

            gen = Generator.load(artifact, device=device)
        if embeddings is not None:
            from .embeddings import load_embedder

            emb = load_embedder(embeddings, device=device)
        return cls(gen, emb, model_name(artifact) if artifact else None,
                   model_name(embeddings) if embeddings else None)

    def model_ids(self) -> list[str]:
        return ([self.model] if self.generator is not None else []) + (
            [self.embedding_model] if self.embedder is not None else [])

    def check_model(self, model: str | None, kind: str) -> None:
        have = self.generator if kind == "chat" else self.embedder
        name = self.model if kind == "chat" else self.embedding_model
        if have is None:
            raise WebinferError(f"no {'generation' if kind == 'chat' else 'embedding'} model is loaded for {kind}")
        if model is not None and model != name:
            raise WebinferError(f"model {model!r} is not loaded here ({kind}: {name!r})")


def _is_generation(path: str) -> bool:
    from ..artifact import Artifact

    return any(io["name"] == "sampling_params" for io in Artifact.load(path).manifest["inputs"])


def model_name(path: str) -> str:
    """A model's name from its artifact folder or URL: ``out/smollm2.wi/`` -> ``smollm2``, a bundled page's
    ``.../chat/artifact/`` -> ``chat``."""
    parts = [p for p in str(path).split("?", 1)[0].replace("\\", "/").split("/") if p]
    base = parts[-1] if parts else "model"
    if base == "artifact" and len(parts) > 1 and not parts[-2].endswith(":"):
        base = parts[-2]
    return base[:-3] if base.endswith(".wi") and len(base) > 3 else base


def OpenAI(artifact: str | None = None, embeddings: str | None = None, device=None) -> Client:  # noqa: N802
    """``webinfer.OpenAI("chat.wi", embeddings="minilm.wi")``: a Client over local artifacts, no key."""
    return Client.load(artifact, embeddings, device)


__all__ = ["Client", "OpenAI", "Record", "chat_events", "completion", "completion_chunks", "constraint_for"]
