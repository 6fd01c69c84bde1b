"""Python side of webinfer's web pages; runs in Pyodide inside the pages' Web Worker (standard library only).

The worker's JavaScript (webinfer/site/worker.mjs) opens the GPU device and writes the weights straight into
GPU buffers; here we fetch only the small files (manifest, shaders, assets), check their sha256 and open a
SessionCore over the JS device and its pre-uploaded weight buffers. ``WorkerHost`` is what the worker calls:
sessions and chats by handle, feeds and outputs as (name, dtype, shape, bytes), tokens through a callback.
It sits above both ``runtime/`` and ``llm/`` (chats are ``llm.generate.Generator``s), so it is neither's.
"""

from __future__ import annotations

import json

from .artifact import CPU_MODEL, MANIFEST_SHA, parse_manifest_bytes, shader_text, verify
from .errors import WebinferError
from .llm.constrain import with_constraint
from .runtime import vision
from .runtime.select import choose_program
from .runtime.session import SessionCore
from .runtime.tensor import HostTensor


class PageSession:
    """A SessionCore plus the artifact's assets, opened from a URL with pre-uploaded weights."""

    def __init__(self, core: SessionCore, device, assets: dict[str, bytes], url: str):
        self.core, self.device, self.assets, self.url = core, device, assets, url
        self._tokenizer = None

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
        choice = choose_program(manifest, gpu.facts(), kernel_class)
        shaders: list = [None] * len(manifest["shaders"])  # only the chosen program's are fetched
        for i in sorted({s["shader"] for s in manifest["programs"][choice.index]["steps"]}):
            entry = manifest["shaders"][i]
            data = await fetch_bytes(base + entry["file"])
            verify(entry, data, base + entry["file"])
            shaders[i] = shader_text(data, spec, i, base + entry["file"])
        assets = {}
        for rel, entry in manifest.get("assets", {}).items():
            if rel == CPU_MODEL:  # the CPU path's (worker.mjs runs it without Python)
                continue
            data = await fetch_bytes(base + rel)
            verify(entry, data, base + rel)
            assets[rel.split("/", 1)[1]] = data
        weights = {int(pair[0]): pair[1] for pair in weight_pairs}

        def no_shards(i: int) -> bytes:
            raise WebinferError("weights must come pre-uploaded from the page's loader")

        core = SessionCore(manifest, shaders, no_shards, gpu, weights=weights, kernel_class=choice.kernel_class)
        core.choice = choice  # (forcing the chosen class keeps its reason)
        return cls(core, gpu, assets, base)

    async def classify(self, pixels, width: int, height: int) -> list[tuple[str, float]]:
        """RGBA8 pixels of any size (an ImageData's bytes) -> [(label, score)], best first (an artifact built
        with --preprocess and --postprocess; ``runtime/vision.py``)."""
        return await vision.classify(self.core, pixels, width, height, self.assets.get)

    async def run(self, feeds: dict[str, HostTensor], outputs: list[str] | None = None) -> dict[str, HostTensor]:
        results = await self.core.run_async(outputs, feeds)
        names = outputs or [io["name"] for io in self.core.manifest["outputs"]]
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
        self._next = 1

    def _add(self, item) -> int:
        handle, self._next = self._next, self._next + 1
        self._items[handle] = item
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
        return json.dumps({"handle": self._add(session), **_describe(session, self.gpu)})

    async def open_chat(self, artifact_url: str, weight_pairs, kernel_class=None) -> str:
        """Open a Generator and compile its prefill and decode pipelines with a short warm-up."""
        from .llm.generate import Generator

        session = await PageSession.open(artifact_url, self.adapter, self.device, weight_pairs, self.gpu,
                                         _py(kernel_class) or None)
        gen = Generator(session.core, session.tokenizer())
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
        return json.dumps({"handle": self._add(gen), **info})

    async def run(self, handle: int, feeds) -> list:
        """``feeds``: [[name, dtype, shape, bytes], ...]; returns the outputs in the same form."""
        session = self._get(handle)
        host = {str(name): HostTensor(str(dtype), [int(d) for d in shape], _bytes(data))
                for name, dtype, shape, data in _py(feeds)}
        out = await session.run(host)
        return [[name, t.dtype, list(t.shape), t.data] for name, t in out.items()]

    async def classify(self, handle: int, pixels, width: int, height: int) -> list:
        """An artifact built with --preprocess/--postprocess: RGBA8 ``pixels`` (an ImageData's bytes) ->
        [[label, score], ...], best first."""
        top = await self._get(handle).classify(_bytes(pixels), int(width), int(height))
        return [[label, score] for label, score in top]

    def encode(self, handle: int, text: str) -> list[int]:
        """Token ids of ``text`` with the artifact's tokenizer (special tokens as its post-processor adds)."""
        tok = self._get(handle).tokenizer()
        ids = tok.encode(str(text))
        return list(getattr(ids, "ids", ids))

    async def chat(self, handle: int, messages_json: str, options_json: str, on_token) -> str:
        """Stream the assistant's answer to ``messages`` (OpenAI-style); ``on_token(id, text)`` per token;
        returns the turn's stats as JSON."""
        gen = self._get(handle)
        messages = json.loads(messages_json)
        options = with_constraint(json.loads(options_json), gen.tokenizer)  # jsonSchema/regex/grammar
        async for tok in gen.achat(messages, **options):
            on_token(tok.id, tok.text)
        return json.dumps(gen.stats)

    def cancel(self, handle: int) -> None:
        item = self._items.get(int(handle))
        if item is not None and hasattr(item, "cancel"):
            item.cancel()

    def close(self, handle: int) -> None:
        """Forget the session or chat and free its GPU memory (weights, KV cache, plans)."""
        item = self._items.pop(int(handle), None)
        if item is not None:
            item.core.release()


def _describe(session: PageSession, gpu) -> dict:
    core = session.core
    return {"inputs": [_io(i) for i in core.get_inputs()], "outputs": [_io(o) for o in core.get_outputs()],
            "adapter": gpu.adapter_name, "tokenizer": "tokenizer.json" in session.assets,
            "kernel_class": core.choice.kernel_class, "kernel_class_why": core.choice.why}


def _io(info) -> dict:
    return {"name": info.name, "type": info.dtype, "dims": [d if isinstance(d, int) else str(d) for d in info.shape]}


def _py(value):
    """A JS value handed to Python (a JsProxy) as Python lists; Python values unchanged."""
    return value.to_py(depth=1) if hasattr(value, "to_py") else value


def _bytes(data) -> bytes:
    return data.to_bytes() if hasattr(data, "to_bytes") else bytes(data)
