"""A page worker's sessions re-opened on a new GPU device after the old one was lost (site/recover.mjs drives it).

A lost WebGPU device takes every buffer with it: weights, KV caches, plans. The worker's JavaScript re-creates the
device and writes the weights again (from Cache Storage); here each session is opened again over them under the
handle the page already holds, and a chat gets its conversation back: the token ids its KV cache held (or, when
the loss cut a turn short, that turn's prompt) are prefilled into the new cache, so the next turn prefills only
what is new and samples the same ids as a fresh chat would. Standard library only (runs in Pyodide).
"""

from __future__ import annotations

import json

from .runtime.browser import BrowserDevice


def rebind(host, adapter, device) -> None:
    """Point ``host`` (a page.WorkerHost) at the new adapter and device; its sessions are re-opened one by one."""
    host.adapter, host.device = adapter, device
    host.gpu = BrowserDevice(adapter, device)


async def reopen(host, handle: int, kind: str, url: str, pairs, encoder_pairs=None, kernel_class=None) -> str:
    """Open the artifact at ``url`` again (``kind``: session, chat or seq2seq) on ``host``'s device over the
    re-written weights and put it under ``handle``; returns JSON {handle, restored_tokens}. Waits for a turn that
    is still unwinding from the loss (the chat's lock), so the conversation is read after it ended."""
    handle = int(handle)
    kind, url = str(kind), str(url)
    if handle not in host._items:  # closed meanwhile
        return json.dumps({"handle": handle, "restored_tokens": 0})
    async with host._busy(handle):
        old = host._items.get(handle)
        if kind == "chat":
            text = await host.open_chat(url, pairs, kernel_class)
        elif kind == "seq2seq":
            text = await host.open_seq2seq(url, pairs, encoder_pairs, kernel_class)
        else:
            text = await host.open_session(url, pairs, kernel_class)
        fresh = json.loads(text)["handle"]
        item = host._items.pop(fresh)
        host._names.pop(fresh, None)
        if old is None:  # closed while it was being opened again
            (item.release if hasattr(item, "release") else item.core.release)()
            return json.dumps({"handle": handle, "restored_tokens": 0})
        host._items[handle] = item
        restored = await restore_conversation(old, item) if kind == "chat" else 0
    return json.dumps({"handle": handle, "restored_tokens": restored})


async def restore_conversation(old, gen) -> int:
    """Prefill into ``gen``'s (empty) KV cache the ids ``old``'s cache held; when a turn was cut short (its cache
    then holds nothing it can vouch for), that turn's prompt, which the retried turn starts with. One token is
    sampled and dropped: a generation of one token leaves exactly its prompt in the cache."""
    ids = list(old._cached) or list(old.stats.get("prompt_ids") or [])
    if not ids or len(ids) + 1 > gen.max_seq:
        return 0
    async for _ in gen.agenerate(ids, max_new_tokens=1, stop_at_eos=False):
        pass
    return len(gen._cached)
