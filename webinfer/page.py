"""Python side of webinfer's web pages; runs in Pyodide inside the pages' Web Worker (standard library only).

The worker's JavaScript (webinfer/site/worker.mjs) opens the GPU device and writes the weights straight into
GPU buffers; here we fetch only the small files (manifest, shaders, assets), check their sha256 and open a
SessionCore over the JS device and its pre-uploaded weight buffers. ``WorkerHost`` is what the worker calls:
sessions and chats by handle, feeds and outputs as (name, dtype, shape, bytes), tokens through a callback.
It sits above both ``runtime/`` and ``llm/`` (chats are ``llm.generate.Generator``s), so it is neither's.
"""

from __future__ import annotations

import json

from .artifact import CPU_MODEL, MANIFEST_SHA, parse_manifest_bytes, sha256, shader_text, verify
from .errors import WebinferError
from .format.schema import to_json
from .llm.constrain import with_constraint
from .llm.openai_api import model_name
from .runtime import audio, vision, vision_tasks
from .runtime.select import choose_program
from .runtime.session import SessionCore
from .runtime.tensor import HostTensor


class PageSession:
    """A SessionCore plus the artifact's assets, opened from a URL with pre-uploaded weights."""

    def __init__(self, core: SessionCore, device, assets: dict[str, bytes], url: str):
        self.core, self.device, self.assets, self.url = core, device, assets, url
        self._tokenizer = None
        self.sha256: str | None = None  # the manifest's: the artifact's identity (a prefix cache records it)

    @classmethod
    async def open(cls, artifact_url: str, adapter, device, weight_pairs, gpu=None,
                   kernel_class: str | None = None) -> PageSession:
        """``gpu``: a BrowserDevice over ``device`` to share between sessions (default: a new one).
        ``kernel_class`` forces one of the artifact's programs; by default select.py chooses for the adapter
        (the worker's JS chose the same one to upload its weights, and checks ``core.choice``)."""
        from .runtime.browser import BrowserDevice, fetch_bytes

        base = artifact_url if artifact_url.endswith("/") else artifact_url + "/"
        raw, sha = await fetch_bytes(base + "manifest.json"), await fetch_bytes(base + MANIFEST_SHA)
        manifest, spec = parse_manifest_bytes(raw, sha, base + "manifest.json")
        gpu = gpu or BrowserDevice(adapter, device)
        choice = choose_program(spec, gpu.facts(), kernel_class)
        shaders: list = [None] * len(spec.shaders)  # only the chosen program's are fetched
        for i in sorted({s.shader for s in spec.programs[choice.index].steps}):
            entry = spec.shaders[i]
            data = await fetch_bytes(base + entry.file)
            verify(entry, data, base + entry.file)
            shaders[i] = shader_text(data, spec, i, base + entry.file)
        assets = {}
        for rel, entry in spec.assets.items():
            if rel == CPU_MODEL:  # the CPU path's (worker.mjs runs it without Python)
                continue
            data = await fetch_bytes(base + rel)
            verify(entry, data, base + rel)
            assets[rel.split("/", 1)[1]] = data
        weights = {int(pair[0]): pair[1] for pair in weight_pairs}

        def no_shards(i: int) -> bytes:
            raise WebinferError("weights must come pre-uploaded from the page's loader")

        core = SessionCore(manifest, shaders, no_shards, gpu, weights=weights, kernel_class=choice.kernel_class,
                           spec=spec)
        core.choice = choice  # (forcing the chosen class keeps its reason)
        session = cls(core, gpu, assets, base)
        session.sha256 = sha256(raw)
        return session

    async def classify(self, pixels, width: int, height: int) -> list[tuple[str, float]]:
        """RGBA8 pixels of any size (an ImageData's bytes) -> [(label, score)], best first (an artifact built
        with --preprocess and --postprocess; ``runtime/vision.py``)."""
        return await vision.classify(self.core, pixels, width, height, self.assets.get)

    async def vision(self, task: str, pixels, width: int, height: int):
        """``detect`` (-> [{label, score, box}]) or ``segment`` (-> a dict: runtime/vision_tasks.py) of RGBA8
        pixels, with an artifact built with --task object-detection / image-segmentation / background-removal."""
        fn = {"detect": vision_tasks.detect, "segment": vision_tasks.segment}.get(task)
        if fn is None:
            raise WebinferError(f"unknown vision task {task[:40]!r} (detect or segment)")
        return await fn(self.core, pixels, width, height, self.assets.get)

    async def run(self, feeds: dict[str, HostTensor], outputs: list[str] | None = None,
                  dims: dict | None = None) -> dict[str, HostTensor]:
        """``dims``: values of dims no input carries (an audio prologue's sample rate: ``runtime/audio.py``)."""
        feeds, dims = audio.pack_audio(self.core.spec, feeds, dims)
        results = await self.core.run_async(outputs, feeds, dims)
        names = outputs or [io.name for io in self.core.program.outputs]
        return dict(zip(names, results))

    def tokenizer(self):
        """The artifact's tokenizer (tokenizer.json asset): byte-level BPE or WordPiece."""
        if self._tokenizer is None:
            from .llm import load_tokenizer

            if "tokenizer.json" not in self.assets:
                raise WebinferError("this artifact carries no tokenizer (build it from a folder holding "
                                    "tokenizer.json)")
            config = self.assets.get("tokenizer_config.json")
            self._tokenizer = load_tokenizer(self.assets["tokenizer.json"].decode(),
                                             config.decode() if config else None)
        return self._tokenizer


class WorkerHost:
    """Sessions and chats of one page's worker over one GPU device, by integer handle."""

    def __init__(self, adapter, device):
        from .runtime.browser import BrowserDevice

        self.adapter, self.device = adapter, device
        self.gpu = BrowserDevice(adapter, device)
        self._items: dict[int, object] = {}
        self._prefixes: dict[int, object] = {}  # chat handle -> its ConversationPrefix (llm/prefix_cache.py)
        self._names: dict[int, str | None] = {}  # the model names of the OpenAI-shaped API
        self._locks: dict[int, object] = {}
        self._next = 1

    def _add(self, item, url: str = "") -> int:
        handle, self._next = self._next, self._next + 1
        self._items[handle] = item
        self._names[handle] = model_name(url) if url else None
        return handle

    def _get(self, handle: int):
        try:
            return self._items[int(handle)]
        except KeyError:
            raise WebinferError(f"no open session {handle} (closed?)") from None

    async def open_session(self, artifact_url: str, weight_pairs, kernel_class=None) -> str:
        """Open a session; returns JSON {handle, inputs, outputs, adapter, tokenizer, kernel_class, why}."""
        session = await PageSession.open(artifact_url, self.adapter, self.device, weight_pairs, self.gpu,
                                         _py(kernel_class) or None)
        return json.dumps({"handle": self._add(session, artifact_url), **_describe(session, self.gpu)})

    async def open_chat(self, artifact_url: str, weight_pairs, kernel_class=None) -> str:
        """Open a Generator and compile its prefill and decode pipelines with a short warm-up."""
        from .llm.generate import Generator

        session = await PageSession.open(artifact_url, self.adapter, self.device, weight_pairs, self.gpu,
                                         _py(kernel_class) or None)
        gen = Generator(session.core, session.tokenizer())
        gen.artifact_sha256 = session.sha256
        # A prefill of two tokens (the prefill kernels: more than one row) and a decode step compile every
        # pipeline before the first message; more tokens would only add compute (a 31-token chat prompt cost
        # ~0.5 s more natively, more on SwiftShader). Then the cache is forgotten, so the first turn is timed as
        # it would be on a warm page.
        warm = gen.chat_ids([{"role": "user", "content": "Hi"}])[:2]
        async for _ in gen.agenerate(warm, max_new_tokens=2, stop_at_eos=False):
            pass
        gen.reset()
        info = _describe(session, self.gpu)
        info["max_seq"] = gen.max_seq
        return json.dumps({"handle": self._add(gen, artifact_url), **info})

    async def open_seq2seq(self, artifact_url: str, weight_pairs, encoder_pairs, kernel_class=None) -> str:
        """Open an encoder-decoder artifact (llm/seq2seq.py): the decoder step at ``artifact_url``, its nested
        encoder beside, both on this worker's device."""
        from .llm.seq2seq import Seq2SeqGenerator

        kclass = _py(kernel_class) or None
        dec = await PageSession.open(artifact_url, self.adapter, self.device, weight_pairs, self.gpu, kclass)
        join = dec.core.spec.seq2seq
        if join is None:
            raise WebinferError("not an encoder-decoder artifact (its manifest has no seq2seq block)")
        enc = await PageSession.open(dec.url + join.encoder + "/", self.adapter, self.device, encoder_pairs,
                                     self.gpu, kclass)
        gen = Seq2SeqGenerator(enc.core, dec.core, dec.tokenizer() if "tokenizer.json" in dec.assets else None)
        info = _describe(dec, self.gpu)
        info.update(max_seq=gen.max_seq, first_tokens=gen.first_tokens, audio=to_json(enc.core.spec.audio),
                    encoder_inputs=[_io(i) for i in enc.core.get_inputs()])
        return json.dumps({"handle": self._add(gen), **info})

    async def seq2seq(self, handle: int, source, options_json: str, on_token) -> str:
        """One input through an encoder-decoder: ``source`` text (with the artifact's tokenizer) or the encoder's
        feeds [[name, dtype, shape, bytes], ...]; ``on_token(id, text)`` per token; returns the stats as JSON."""
        gen = self._get(handle)
        source = _py(source)
        feeds = gen.text_feeds(source) if isinstance(source, str) else {
            str(name): HostTensor(str(dtype), [int(d) for d in _py(shape)], _bytes(data))
            for name, dtype, shape, data in (_py(f) for f in source)}
        return await self._generate(handle, feeds, options_json, on_token)

    async def transcribe(self, handle: int, data, rate: int, channels: int, options_json: str, on_token) -> str:
        """Speech to text with an artifact whose encoder has the audio prologue: ``data`` a WAV file's bytes
        (``rate`` 0: its header gives the rate) or float32 PCM at ``rate`` Hz, ``channels`` rows of samples one
        after the other. The sample rate becomes the prologue's rate dim; resampling and log-mel run on the GPU."""
        gen = self._get(handle)
        prologue = gen.encoder.spec.audio
        if prologue is None:
            raise WebinferError("this artifact's encoder takes features, not audio (it was built with --preprocess "
                                "none): rebuild it without, or feed the features")
        raw, rate, channels = _bytes(data), int(rate), int(channels)
        if rate:
            if channels < 1 or not raw or len(raw) % (4 * channels):
                raise WebinferError(f"audio: {len(raw)} bytes are not float32 samples in {channels} channel(s)")
            pcm = audio.audio_feed(raw) if channels == 1 else HostTensor(
                "float32", [channels, len(raw) // (4 * channels)], raw)
        else:
            pcm, rate = audio.read_wav(raw)
        return await self._generate(handle, {prologue.audio: pcm, prologue.rate: rate}, options_json, on_token)

    async def _generate(self, handle: int, feeds: dict, options_json: str, on_token) -> str:
        gen = self._get(handle)
        async with self._busy(handle):  # one input at a time per decoder cache
            async for tok in gen.agenerate(feeds, **json.loads(options_json)):
                on_token(tok.id, tok.text)
        return json.dumps(gen.stats)

    async def run(self, handle: int, feeds, dims_json: str | None = None) -> list:
        """``feeds``: [[name, dtype, shape, bytes], ...]; returns the outputs in the same form. ``dims_json``: dims
        no input carries, e.g. ``{"audio_rate": 44100}`` (the page's ``sample_rate`` feed)."""
        session = self._get(handle)
        host = {str(name): HostTensor(str(dtype), [int(d) for d in shape], _bytes(data))
                for name, dtype, shape, data in _py(feeds)}
        out = await session.run(host, dims=json.loads(dims_json) if dims_json else None)
        return [[name, t.dtype, list(t.shape), t.data] for name, t in out.items()]

    async def classify(self, handle: int, pixels, width: int, height: int) -> list:
        """An artifact built with --preprocess/--postprocess: RGBA8 ``pixels`` (an ImageData's bytes) ->
        [[label, score], ...], best first."""
        top = await self._get(handle).classify(_bytes(pixels), int(width), int(height))
        return [[label, score] for label, score in top]

    async def vision(self, handle: int, task: str, pixels, width: int, height: int) -> list:
        """``task`` detect / segment on RGBA8 ``pixels`` -> [JSON of the result without its tensors, the bytes
        of its image-sized tensor (segment's cut-out RGBA8 or int32 class map) or None]."""
        out = await self._get(handle).vision(str(task), _bytes(pixels), int(width), int(height))
        if isinstance(out, list):
            return [json.dumps({"detections": out}), None]
        out["mode"] = "matte" if "cutout" in out else "argmax"
        data = out.pop("cutout") if "cutout" in out else out.pop("segments").data
        out.pop("matte", None)
        return [json.dumps(out), data]

    def encode(self, handle: int, text: str) -> list[int]:
        """Token ids of ``text`` with the artifact's tokenizer (special tokens as its post-processor adds)."""
        tok = self._get(handle).tokenizer()
        ids = tok.encode(str(text))
        return list(getattr(ids, "ids", ids))

    async def chat(self, handle: int, messages_json: str, options_json: str, on_token, prefix_blob=None) -> str:
        """Stream the assistant's answer to ``messages`` (OpenAI-style); ``on_token(id, text)`` per token;
        returns the turn's stats as JSON. ``prefix_blob``: a saved prefix cache (``prefix_key``) restored first;
        one that cannot be is ignored, its reason in the stats' ``prefix_cache.warning``."""
        gen = self._get(handle)
        messages = json.loads(messages_json)
        options = with_constraint(json.loads(options_json), gen.tokenizer)  # jsonSchema/regex/grammar
        async with self._busy(handle):
            restored = None if prefix_blob is None else self._prefix(handle).restore(gen, _bytes(prefix_blob), messages)
            async for tok in gen.achat(messages, **options):
                on_token(tok.id, tok.text)
        return json.dumps({**gen.stats, **({"prefix_cache": restored} if restored else {})})

    def prefix_key(self, handle: int, messages_json: str):
        """The storage key of the positions of the conversation's system prompt when it opens with one that the
        KV cache does not hold yet (a first turn), else None (llm/prefix_cache.py)."""
        return self._prefix(handle).key(self._get(handle), json.loads(messages_json))

    async def prefix_blob(self, handle: int):
        """The saved prefix cache of the system prompt ``prefix_key`` named, once the cache holds it (else None)."""
        return await self._prefix(handle).save(self._get(handle))

    def _prefix(self, handle: int):
        from .llm.prefix_cache import ConversationPrefix

        return self._prefixes.setdefault(int(handle), ConversationPrefix())

    def _busy(self, handle: int):
        """The lock that keeps one generation at a time on a chat (messages arrive concurrently)."""
        import asyncio

        return self._locks.setdefault(int(handle), asyncio.Lock())

    async def api(self, handle: int, method: str, request_json: str, on_chunk) -> str:
        """The OpenAI-shaped API (llm/openai_api.py) on an open item: ``chat.completions`` on a chat (a stream
        calls ``on_chunk(chunk_json)`` per chunk and returns "null"), ``embeddings`` on a session of an artifact
        built with --sentence-embedding. Returns the answer as JSON."""
        from .llm import openai_api

        item, request = self._get(handle), json.loads(request_json)
        if method == "chat.completions":
            if not hasattr(item, "agenerate"):
                raise WebinferError("chat.completions needs a chat (webinfer.chat(url)), not a plain session")
            client = openai_api.Client(item, model=self._names.get(int(handle)))
            async with self._busy(handle):  # one generation at a time per KV cache
                answer = await client.chat.completions.acreate(**request)
                if not request.get("stream"):
                    return json.dumps(answer)
                async for chunk in answer:
                    on_chunk(json.dumps(chunk))
            return "null"
        if method == "embeddings":
            from .llm.embeddings import Embedder, check_embedding_outputs

            if not isinstance(item, PageSession):
                raise WebinferError("embeddings need a session of an embedding artifact (webinfer.load(url))")
            check_embedding_outputs(o.name for o in item.core.get_outputs())
            embedder = Embedder(item.core.run_async, item.core.get_inputs(), item.tokenizer())
            client = openai_api.Client(None, embedder, embedding_model=self._names.get(int(handle)))
            if not isinstance(request, dict) or "input" not in request:
                raise WebinferError("embeddings.create needs {input}")
            return json.dumps(await client.embeddings.acreate(**request))
        raise WebinferError(f"unknown API method {method!r} (chat.completions, embeddings)")

    def rebind(self, adapter, device) -> None:
        """After a device loss: the new device, for the sessions ``reopen`` puts back (page_recover.py)."""
        from .page_recover import rebind

        rebind(self, adapter, device)

    async def reopen(self, handle: int, kind: str, url: str, pairs, encoder_pairs=None, kernel_class=None) -> str:
        """Open ``handle``'s artifact again on the new device, a chat with its conversation (page_recover.py)."""
        from .page_recover import reopen

        return await reopen(self, handle, kind, url, pairs, encoder_pairs, _py(kernel_class) or None)

    def cancel(self, handle: int) -> None:
        item = self._items.get(int(handle))
        if item is not None and hasattr(item, "cancel"):
            item.cancel()

    def close(self, handle: int) -> None:
        """Forget the session or chat and free its GPU memory (weights, KV cache, plans)."""
        item = self._items.pop(int(handle), None)
        self._prefixes.pop(int(handle), None)
        if item is not None:
            (item.release if hasattr(item, "release") else item.core.release)()


def _describe(session: PageSession, gpu) -> dict:
    core = session.core
    return {"inputs": [_io(i) for i in core.get_inputs()], "outputs": [_io(o) for o in core.get_outputs()],
            "adapter": gpu.adapter_name, "tokenizer": "tokenizer.json" in session.assets,
            "kernel_class": core.choice.kernel_class, "kernel_class_why": core.choice.why,
            "audio": to_json(core.spec.audio),  # (the page reads the blocks as the JSON has them)
            "output_formats": to_json(core.spec.output_formats) or []}


def _io(info) -> dict:
    return {"name": info.name, "type": info.dtype, "dims": [d if isinstance(d, int) else str(d) for d in info.shape]}


def _py(value):
    """A JS value handed to Python (a JsProxy) as Python lists; Python values unchanged."""
    return value.to_py(depth=1) if hasattr(value, "to_py") else value


def _bytes(data) -> bytes:
    return data.to_bytes() if hasattr(data, "to_bytes") else bytes(data)
