"""A prefix cache that outlives the process or the page: the KV cache's first positions saved as one blob.

A returning visitor's system prompt is otherwise prefilled again from nothing. The keys and values of the
first N positions depend only on those N token ids (attention is causal) and on the program that computed
them, so they are read back from the in-place cache once, stored with the artifact's identity and the exact
ids, and on the next visit uploaded instead of prefilled: only the rest of the prompt runs.

Blob (little-endian)::

    8 bytes   MAGIC
    4 bytes   header length H
    H bytes   header, UTF-8 JSON: {"artifact": manifest sha256, "program": kernel class, "positions": N,
              "ids": [N token ids], "states": [[name, dtype, capacity, sequence axis], ...], "payload": bytes}
    payload   per state in manifest order, per index of the dims before the sequence axis: the N positions'
              rows as the GPU holds them
    32 bytes  sha256 of everything before

A blob that fails any check (magic, checksum, artifact, program, layout, ids) is refused with one line, never
restored: a wrong cache would give a wrong answer silently. Standard library only (runs in Pyodide).
"""

from __future__ import annotations

import hashlib
import json
import struct
import time

from ..dtypes import gpu_nbytes
from ..errors import WebinferError
from .streaming import common_prefix

MAGIC = b"WIPREFX1"
_DIGEST = 32


class PrefixCacheError(WebinferError):
    """A prefix cache blob that cannot be restored here (altered, truncated, or made by another artifact)."""


def _layout(gen) -> list[dict]:
    """Where each state's first positions live: one region per index of the dims before the sequence axis."""
    core, out = gen.core, []
    for st in core.spec.states:
        t = core.tensors[st.tensor]
        axes = [i for i, d in enumerate(t.shape) if d == gen.past_dim]
        if len(axes) != 1:
            raise PrefixCacheError(f"state {st.name}: no single sequence axis ({gen.past_dim}); cannot cache it")
        axis, cap = axes[0], list(t.capacity)
        outer = _prod(cap[:axis])
        row = gpu_nbytes(t.dtype, _prod(cap[axis + 1:]))  # one position's bytes
        if row * 2 != gpu_nbytes(t.dtype, 2 * _prod(cap[axis + 1:])):
            raise PrefixCacheError(f"state {st.name}: {t.dtype} rows are not whole 32-bit words")
        out.append({"tensor": st.tensor, "name": st.name, "dtype": t.dtype, "capacity": cap, "axis": axis,
                    "outer": outer, "seq": cap[axis], "row": row})
    if not out:
        raise PrefixCacheError("this artifact has no KV cache states")
    return out


def identity(gen) -> dict:
    """What a blob must match to be restored into ``gen``: the artifact, its program and the states' layout."""
    if not getattr(gen, "artifact_sha256", None):
        raise PrefixCacheError("the generator does not know its artifact's sha256 (open it with Generator.load)")
    return {"artifact": gen.artifact_sha256, "program": gen.core.choice.kernel_class,
            "states": [[s["name"], s["dtype"], s["capacity"], s["axis"]] for s in _layout(gen)]}


async def asave(gen, positions: int | None = None) -> bytes:
    """The blob of the first ``positions`` (default: all) positions the cache holds, read back in one copy."""
    held = list(gen._cached)
    n = len(held) if positions is None else positions
    if not 0 < n <= len(held):
        raise PrefixCacheError(f"the KV cache holds {len(held)} positions; cannot save {n}")
    ident, layout = identity(gen), _layout(gen)
    device = gen.core.device
    copies, at = [], 0
    for s in layout:
        buf = gen.core.states[s["tensor"]]
        for o in range(s["outer"]):
            copies.append((buf, o * s["seq"] * s["row"], None, at, n * s["row"]))
            at += n * s["row"]
    readback = device.create_buffer(at, "readback")
    try:
        device.submit([], [(src, so, readback, do, size) for src, so, _, do, size in copies])
        payload = await device.read(readback, at)
    finally:
        device.destroy_buffer(readback)
    header = json.dumps({**ident, "positions": n, "ids": held[:n], "payload": at}, separators=(",", ":")).encode()
    body = MAGIC + struct.pack("<I", len(header)) + header + payload
    return body + hashlib.sha256(body).digest()


def parse(blob: bytes) -> tuple[dict, memoryview]:
    """The header and payload of a blob whose magic, lengths and checksum hold."""
    blob = memoryview(blob).cast("B") if not isinstance(blob, memoryview) else blob.cast("B")
    if len(blob) < len(MAGIC) + 4 + _DIGEST or bytes(blob[:len(MAGIC)]) != MAGIC:
        raise PrefixCacheError("not a webinfer prefix cache (bad magic or too short)")
    if hashlib.sha256(blob[:-_DIGEST]).digest() != bytes(blob[-_DIGEST:]):
        raise PrefixCacheError("checksum mismatch (the prefix cache was altered or truncated)")
    (hlen,) = struct.unpack_from("<I", blob, len(MAGIC))
    start = len(MAGIC) + 4 + hlen
    if start > len(blob) - _DIGEST:
        raise PrefixCacheError("header longer than the blob")
    try:
        header = json.loads(bytes(blob[len(MAGIC) + 4:start]).decode("utf-8"))
        ids, n = header["ids"], header["positions"]
        ok = (isinstance(ids, list) and all(type(i) is int for i in ids) and type(n) is int and n == len(ids) > 0
              and header["payload"] == len(blob) - _DIGEST - start)
    except (ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        raise PrefixCacheError("malformed header")
    return header, blob[start:len(blob) - _DIGEST]


def restore(gen, blob: bytes, prompt_ids: list[int] | None = None) -> int:
    """Upload a blob's keys and values into ``gen``'s cache; returns how many positions it now holds from it.

    With ``prompt_ids``, only the positions whose ids the prompt shares are restored (each position's keys and
    values depend only on the ids up to it), at most all but the prompt's last token, which the generation must
    prefill to sample from. One write of the payload to a staging buffer, one submit of copies into the states."""
    header, payload = parse(blob)
    want = identity(gen)
    for key, what in (("artifact", "another artifact"), ("program", "another kernel class"),
                      ("states", "another KV cache layout")):
        if header.get(key) != want[key]:
            raise PrefixCacheError(f"made by {what} ({key} differs); not restored")
    ids = header["ids"]
    layout = _layout(gen)
    if header["payload"] != sum(s["outer"] * len(ids) * s["row"] for s in layout):
        raise PrefixCacheError("payload size does not match its positions")
    if len(ids) > gen.max_seq:
        raise PrefixCacheError(f"{len(ids)} positions exceed this KV cache's {gen.max_seq}")
    n = len(ids)
    if prompt_ids is not None:
        n = common_prefix(ids, prompt_ids, len(prompt_ids) - 1)
        if n == 0:
            raise PrefixCacheError("the prompt does not start with the cached token ids")
    device = gen.core.device
    staging = device.create_buffer(len(payload), "storage")
    try:
        device.write_buffer(staging, 0, payload)
        copies, at = [], 0
        for s in layout:
            buf = gen.core.states[s["tensor"]]
            for o in range(s["outer"]):
                copies.append((staging, at, buf, o * s["seq"] * s["row"], n * s["row"]))
                at += len(ids) * s["row"]
        gen._cached = []  # unknown until the copies are submitted
        device.submit([], copies)
    finally:
        device.destroy_buffer(staging)  # (WebGPU frees it once the submitted copies are done)
    gen._cached = list(ids[:n])
    return n


def system_prefix_ids(gen, system: str) -> list[int]:
    """The ids a conversation opening with this system message starts with, whatever the user says next: the
    common prefix of two renderings that differ only in the user's text (templates differ in what follows)."""
    a = gen.chat_ids([{"role": "system", "content": system}, {"role": "user", "content": "x"}])
    b = gen.chat_ids([{"role": "system", "content": system}, {"role": "user", "content": "y"}])
    return a[:common_prefix(a, b, len(a))]


def cache_key(gen, ids: list[int]) -> str:
    """A storage key for ``ids`` cached by ``gen``'s artifact and program (the page's Cache Storage)."""
    ident = identity(gen)
    text = f"{ident['artifact']}:{ident['program']}:" + ",".join(map(str, ids))
    return hashlib.sha256(text.encode()).hexdigest()


class ConversationPrefix:
    """One page chat's prefix cache: the system prompt's positions, stored by the worker under ``key``.

    A first turn that opens with a system message the KV cache does not hold gets a key (artifact, program and
    the system prompt's ids); the worker looks it up, ``restore`` uploads what it finds before the prefill, and
    when nothing was restored ``save`` gives the blob to store once the turn is done. Later turns (and a new chat
    with the same system prompt) find the positions already in the cache and need no key."""

    def __init__(self):
        self.system: str | None = None
        self.ids: list[int] = []

    def key(self, gen, messages) -> str | None:
        if not messages or not isinstance(messages[0], dict) or messages[0].get("role") != "system":
            return None
        if messages[0].get("content") != self.system:
            self.system = messages[0].get("content")
            self.ids = system_prefix_ids(gen, self.system) if isinstance(self.system, str) else []
        if not self.ids or gen._cached[:len(self.ids)] == self.ids:
            return None
        return cache_key(gen, self.ids)

    def restore(self, gen, blob: bytes, messages) -> dict:
        """Restore ``blob`` for this conversation: {status: "restored", positions} or {status: "refused",
        warning} (the page goes on without it: a cold prefill, never a wrong cache)."""
        t = time.perf_counter()
        try:
            n = restore(gen, blob, gen.chat_ids(messages))
            return {"status": "restored", "positions": n, "restore_ms": round((time.perf_counter() - t) * 1000)}
        except WebinferError as e:
            return {"status": "refused", "warning": str(e)}

    async def save(self, gen) -> bytes | None:
        if not self.ids or gen._cached[:len(self.ids)] != self.ids:
            return None
        return await asave(gen, len(self.ids))


def _prod(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


__all__ = ["MAGIC", "ConversationPrefix", "PrefixCacheError", "asave", "cache_key", "identity", "parse", "restore", "system_prefix_ids"]
