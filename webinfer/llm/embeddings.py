"""Sentence embeddings: texts -> unit-length vectors, pooled and normalised on the GPU.

Needs an artifact built with ``--sentence-embedding`` (graph/pooling.py): the build appends the pooling the
model's sentence-transformers config names (mean over the attention mask, CLS or max) and, when the config
has a Normalize module, L2 normalisation, as a ``sentence_embedding`` output [batch, width]; one batch
reads back only those rows. Texts are encoded with the artifact's tokenizer ([CLS] ... [SEP] for BERT),
padded to the longest. Standard library only (the page runs it too).
"""

from __future__ import annotations

import base64
import struct
from array import array

from ..errors import WebinferError
from ..runtime.tensor import HostTensor

OUTPUT = "sentence_embedding"


def check_embedding_outputs(output_names) -> None:
    if OUTPUT not in list(output_names):
        raise WebinferError(f"this artifact has no {OUTPUT!r} output: build it with --sentence-embedding "
                            "(pooling and normalisation as the model's sentence-transformers config says)")


def embedding_feeds(tokenizer, inputs, items) -> tuple[dict, int]:
    """The feeds for a batch of texts (or token-id lists); returns them and the number of tokens."""
    rows = []
    for item in items:
        if isinstance(item, str):
            ids = tokenizer.encode(item)
            rows.append(list(getattr(ids, "ids", ids)))
        else:
            rows.append(list(item))
    if any(not r for r in rows):
        raise WebinferError("an input to embed is empty")
    n = max(len(r) for r in rows)
    ids = [i for r in rows for i in r + [0] * (n - len(r))]
    mask = [m for r in rows for m in [1] * len(r) + [0] * (n - len(r))]
    values = {"input_ids": ids, "attention_mask": mask, "token_type_ids": [0] * len(ids)}
    feeds = {}
    for io in inputs:
        if io.name not in values:
            raise WebinferError(f"the embedding model has an input {io.name!r}; only input_ids, attention_mask and "
                                "token_type_ids can be fed from text")
        code = {"int64": "q", "int32": "i"}.get(io.dtype)
        if code is None:
            raise WebinferError(f"input {io.name!r} is {io.dtype}; token inputs must be int64 or int32")
        feeds[io.name] = HostTensor(io.dtype, (len(rows), n), array(code, values[io.name]).tobytes())
    return feeds, sum(len(r) for r in rows)


def floats_of(value) -> list[list[float]]:
    """Rows of a [batch, width] float32 result (a HostTensor, or a numpy array natively)."""
    if hasattr(value, "tolist") and not isinstance(value, HostTensor):
        return [[float(x) for x in row] for row in value.tolist()]
    flat = array("f", bytes(value.data))
    width = value.shape[-1]
    return [list(flat[i:i + width]) for i in range(0, len(flat), width)]


class Embedder:
    """Sentence embeddings over any runner: ``run(output_names, feeds)`` a coroutine giving the outputs (a
    native InferenceSession's ``run_async``, or a page session's core), ``inputs`` the model's input infos."""

    def __init__(self, run, inputs, tokenizer):
        self._run, self.inputs, self.tokenizer = run, list(inputs), tokenizer
        self.n_tokens = 0  # of the last call

    async def call_async(self, texts) -> list[list[float]]:
        items = [texts] if isinstance(texts, str) else list(texts) if isinstance(texts, (list, tuple)) else None
        if items is None or not all(isinstance(t, (str, list)) for t in items):
            raise WebinferError(f"texts: expected a string or a list of strings, got {type(texts).__name__}")
        if not items:
            self.n_tokens = 0
            return []
        feeds, self.n_tokens = embedding_feeds(self.tokenizer, self.inputs, items)
        (out,) = await self._run([OUTPUT], feeds)
        return floats_of(out)

    def __call__(self, texts) -> list[list[float]]:
        from ..runtime.session import run_sync

        return run_sync(self.call_async(texts))


def load_embedder(artifact: str, device=None, kernel_class: str | None = None) -> Embedder:
    """An Embedder over an artifact opened natively (wgpu-py), with the artifact's tokenizer."""
    from ..runtime.inference import InferenceSession
    from . import load_tokenizer

    session = InferenceSession(artifact, device=device, kernel_class=kernel_class)
    check_embedding_outputs(o.name for o in session.get_outputs())
    art = session.artifact
    tok_json = art.read_asset("tokenizer.json")
    if tok_json is None:
        raise WebinferError("the artifact has no tokenizer (build from a folder holding tokenizer.json)")
    tokenizer = load_tokenizer(tok_json.decode("utf-8"))
    embedder = Embedder(session.run_async, session.get_inputs(), tokenizer)
    embedder.session = session
    return embedder


def _inputs(input_) -> list:
    """OpenAI's ``input``: a string, a list of strings, a list of token ids, or a list of such lists."""
    if isinstance(input_, str):
        return [input_]
    if isinstance(input_, list) and input_:
        if all(isinstance(x, int) and not isinstance(x, bool) for x in input_):
            return [input_]
        if all(isinstance(x, str) for x in input_) or all(
                isinstance(x, list) and x and all(isinstance(i, int) and not isinstance(i, bool) for i in x)
                for x in input_):
            return input_
    raise WebinferError("input must be a string, a list of strings, a list of token ids, or a list of token-id lists")


async def embeddings_response(embedder, input_, model: str, encoding_format: str = "float", dimensions=None) -> dict:
    """OpenAI's ``embeddings.create`` answer: {object: "list", data: [{object, index, embedding}], model, usage};
    ``encoding_format`` "base64" packs each vector as little-endian float32 (what the openai package asks for)."""
    if encoding_format not in ("float", "base64"):
        raise WebinferError("encoding_format must be 'float' or 'base64'")
    if dimensions is not None:
        raise WebinferError("dimensions is not supported: the model's embeddings have a fixed width")
    vectors = await embedder.call_async(_inputs(input_))
    data = []
    for i, v in enumerate(vectors):
        emb = base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode() if encoding_format == "base64" else v
        data.append({"object": "embedding", "index": i, "embedding": emb})
    n = embedder.n_tokens
    return {"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": n, "total_tokens": n}}
