"""Python side of webinfer's web pages (runs in Pyodide; standard library only).

The page's JavaScript (webinfer/site/webinfer.mjs) opens the GPU device and writes the weights straight into GPU
buffers; here we fetch only the small files (manifest, shaders, assets), check their sha256 and open a
SessionCore over the JS device and its pre-uploaded weight buffers.
"""

from __future__ import annotations

import json

from ..artifact import check_manifest, verify
from ..errors import WebinferError
from .session import SessionCore
from .tensor import HostTensor


class PageSession:
    """A SessionCore plus the artifact's assets, opened from a URL with pre-uploaded weights."""

    def __init__(self, core: SessionCore, device, assets: dict[str, bytes], url: str):
        self.core, self.device, self.assets, self.url = core, device, assets, url

    @classmethod
    async def open(cls, artifact_url: str, adapter, device, weight_pairs) -> "PageSession":
        from .browser import BrowserDevice, fetch_bytes

        base = artifact_url if artifact_url.endswith("/") else artifact_url + "/"
        raw = await fetch_bytes(base + "manifest.json")
        try:
            manifest = json.loads(raw)
        except ValueError as e:
            raise WebinferError(f"{base}manifest.json is not valid JSON ({e})") from None
        check_manifest(manifest, base + "manifest.json")
        shaders = []
        for entry in manifest["shaders"]:
            data = await fetch_bytes(base + entry["file"])
            verify(entry, data, base + entry["file"])
            shaders.append(data.decode())
        assets = {}
        for rel, entry in manifest.get("assets", {}).items():
            data = await fetch_bytes(base + rel)
            verify(entry, data, base + rel)
            assets[rel.split("/", 1)[1]] = data
        weights = {int(pair[0]): pair[1] for pair in weight_pairs}

        def no_shards(i: int) -> bytes:
            raise WebinferError("weights must come pre-uploaded from the page's loader")

        gpu = BrowserDevice(adapter, device)
        return cls(SessionCore(manifest, shaders, no_shards, gpu, weights=weights), gpu, assets, base)

    async def run(self, feeds: dict[str, HostTensor], outputs: list[str] | None = None) -> dict[str, HostTensor]:
        results = await self.core.run_async(outputs, feeds)
        names = outputs or [io["name"] for io in self.core.manifest["outputs"]]
        return dict(zip(names, results))

