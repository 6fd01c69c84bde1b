"""An OpenAI-shaped API over webinfer's artifacts, the same natively, over HTTP (serve_api.py) and in a page.

    client = webinfer.OpenAI("smollm2.wi", embeddings="minilm.wi")
    r = client.chat.completions.create(messages=[{"role": "user", "content": "Hi!"}], temperature=0)
    r.choices[0].message.content, r.usage.completion_tokens, r.choices[0].finish_reason
    for chunk in client.chat.completions.create(messages=..., stream=True):
        print(chunk.choices[0].delta.content or "", end="")
    client.embeddings.create(input=["a", "b"]).data[0].embedding

Results are dicts shaped as OpenAI's JSON (``id``, ``object``, ``created``, ``model``, ``choices``,
``usage``...), readable as attributes too. Requests are checked by api_request.py (unsupported parameters
get one line); one completion runs as chat_completion.py says (tools, stops, logit_bias and logprobs on the
GPU); ``response_format`` json_object / json_schema and a forced tool (``tool_choice`` "required" or named)
need constrained decoding (``webinfer.llm.constrain``), connected in one place:
``chat_completion.constraint_for``. Pyodide: ``acreate``. Standard library.
"""

from __future__ import annotations

import time

from ..errors import WebinferError
from ..runtime.session import run_sync
from .api_request import ChatRequest, parse_chat_request
from .chat_completion import chat_events, completion, completion_chunks, constraint_for


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


def sync_iter(agen):
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
            return sync_iter(completion_chunks(gen, req, model))
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
        swapped = artifact is not None and embeddings is None and not _is_generation(artifact)
        if swapped:
            artifact, embeddings = None, artifact
        gen = emb = None
        if artifact is not None:
            from .generate import Generator

            gen = Generator.load(artifact, device=device)
        if embeddings is not None:
            from .embeddings import load_embedder

            try:
                emb = load_embedder(embeddings, device=device)
            except WebinferError as e:  # (the one artifact given is neither kind: say both)
                if not swapped:
                    raise
                raise WebinferError(f"{embeddings}: neither a decoder built for generation (chat) nor an embedding "
                                    f"model (embeddings): {e}") from None
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

    return any(io.name == "sampling_params" for io in Artifact.load(path).spec.inputs)


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
