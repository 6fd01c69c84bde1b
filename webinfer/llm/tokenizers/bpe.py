"""The BPE model of tokenizer.json: byte-level (GPT-2, Llama 3, Qwen) and SentencePiece-style (byte_fallback,
Llama 2, Mistral, Gemma, Phi-3), with continuing_subword_prefix / end_of_word_suffix / ignore_merges / unk fusing.

Merging follows `tokenizers`' Word::merge_all: repeatedly merge the adjacent pair of lowest merge rank, the
leftmost first. Results are cached per piece, so repeated words cost one dict lookup.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from .errors import Unsupported

# Pieces cached per tokenizer: at most this many, each at most this long (a whole prompt without a
# pre-tokenizer is one piece: caching it would only hold memory).
CACHE_SIZE, CACHE_PIECE = 200_000, 256


_NO_MERGE = (-1, -1)


class MergeTable:
    """The merges as (left id, right id) -> (rank, merged id), each pair worked out when a word first asks for it.

    A tokenizer.json holds tens of thousands of merges (SmolLM2: 48,900) and a prompt's words use a few hundred:
    building the whole table when the tokenizer opens cost ~0.3 s in CPython and ~1 s in Pyodide, at every page
    start (page_cpu.py). Here opening indexes the merges' texts by rank (one dict comprehension), and a pair's
    entry is made, and kept, on its first lookup. `webinfer build` checks every merge (`check`, called by
    tokenizers.check); a file that skipped it meets a merge whose tokens are missing when it encodes.
    """

    def __init__(self, merges: list, vocab: Mapping[str, int], id_to_str: Mapping[int, str], cut: int) -> None:
        self._vocab, self._id_to_str, self._cut = vocab, id_to_str, cut
        # "a b" strings (the older form: tokens hold no spaces) or [a, b] pairs: keyed as they are written
        self._text = all(isinstance(m, str) for m in merges)
        self._ranks: dict = ({m: r for r, m in enumerate(merges)} if self._text
                             else {(m.split(" ", 1)[0], m.split(" ", 1)[1]) if isinstance(m, str) else (m[0], m[1]): r
                                   for r, m in enumerate(merges)})
        self._pairs: dict[tuple[int, int], tuple[int, int]] = {}

    def check(self) -> None:
        """Every merge's three tokens in the vocabulary, else `Unsupported`: what `webinfer build` refuses
        (tokenizers.check), so a packed tokenizer never meets a missing merge when it encodes."""
        vocab, cut = self._vocab, self._cut
        for merge in self._ranks:
            a, b = merge.split(" ", 1) if isinstance(merge, str) else merge
            if a not in vocab or b not in vocab or a + b[cut:] not in vocab:
                raise Unsupported(f"model 'BPE': merge {a!r} {b!r} uses a token missing from the vocabulary")

    def get(self, pair: tuple[int, int]) -> tuple[int, int] | None:
        hit = self._pairs.get(pair)
        if hit is None:
            hit = self._pairs[pair] = self._work_out(pair)
        return None if hit is _NO_MERGE else hit

    def _work_out(self, pair: tuple[int, int]) -> tuple[int, int]:
        a, b = self._id_to_str.get(pair[0]), self._id_to_str.get(pair[1])
        if a is None or b is None:
            return _NO_MERGE
        rank = self._ranks.get(f"{a} {b}" if self._text else (a, b))
        if rank is None:
            return _NO_MERGE
        merged = self._vocab.get(a + b[self._cut:])
        if merged is None:
            raise Unsupported(f"model 'BPE': merge {a!r} {b!r} uses a token missing from the vocabulary")
        return (rank, merged)


class BPE:
    def __init__(self, spec: Mapping) -> None:
        if spec.get("dropout") not in (None, 0, 0.0):
            raise Unsupported("model 'BPE': dropout (sampled merges cannot be reproduced)")
        self.vocab: dict[str, int] = dict(spec["vocab"])
        self.id_to_str: dict[int, str] = {i: t for t, i in self.vocab.items()}
        self.prefix = spec.get("continuing_subword_prefix") or ""
        self.suffix = spec.get("end_of_word_suffix") or ""
        self.byte_fallback = bool(spec.get("byte_fallback"))
        self.fuse_unk = bool(spec.get("fuse_unk"))
        self.ignore_merges = bool(spec.get("ignore_merges"))
        unk = spec.get("unk_token")
        if unk is not None and unk not in self.vocab:
            raise Unsupported(f"model 'BPE': unk_token {unk!r} is not in the vocabulary")
        self.unk_id = None if unk is None else self.vocab[unk]
        self.merges = MergeTable(spec.get("merges") or [], self.vocab, self.id_to_str, len(self.prefix))
        self._cache: dict[str, list[int]] = {}
        self._bytes = [self.vocab.get(f"<0x{b:02X}>") for b in range(256)] if self.byte_fallback else []

    def tokenize(self, piece: str) -> list[int]:
        if not piece:
            return []
        hit = self._cache.get(piece)
        if hit is None:
            if self.ignore_merges and piece in self.vocab:
                hit = [self.vocab[piece]]
            else:
                hit = self._merge(self._symbols(piece))
            if len(piece) <= CACHE_PIECE and len(self._cache) < CACHE_SIZE:
                self._cache[piece] = hit
        return hit

    def _symbols(self, piece: str) -> list[int]:
        vocab, prefix, suffix = self.vocab, self.prefix, self.suffix
        out: list[int] = []
        unk: int | None = None
        last = len(piece) - 1
        for i, c in enumerate(piece):
            s = c
            if i and prefix:
                s = prefix + s
            if i == last and suffix:
                s = s + suffix
            tid = vocab.get(s)
            if tid is not None:
                if unk is not None:
                    out.append(unk)
                    unk = None
                out.append(tid)
                continue
            if self.byte_fallback:
                ids = [self._bytes[b] for b in s.encode("utf-8")]
                if None not in ids:
                    out += ids  # type: ignore[arg-type]
                    continue
            if self.unk_id is not None:
                if unk is not None and not self.fuse_unk:
                    out.append(unk)
                unk = self.unk_id
        if unk is not None:
            out.append(unk)
        return out

    def _merge(self, symbols: list[int]) -> list[int]:
        merges = self.merges
        if len(symbols) < 48:  # short words: rescan, cheaper than a heap in Python
            while len(symbols) > 1:
                best = None
                best_at = -1
                for i in range(len(symbols) - 1):
                    m = merges.get((symbols[i], symbols[i + 1]))
                    if m is not None and (best is None or m[0] < best[0]):
                        best, best_at = m, i
                if best is None:
                    break
                symbols[best_at:best_at + 2] = [best[1]]
            return symbols
        return self._merge_heap(symbols)

    def _merge_heap(self, symbols: list[int]) -> list[int]:
        """Word::merge_all for long pieces: a heap of (rank, position, new id) over a linked list."""
        merges = self.merges
        n = len(symbols)
        ids = list(symbols)
        prev = list(range(-1, n - 1))
        nxt = list(range(1, n + 1))
        alive = [True] * n
        heap = []
        for i in range(n - 1):
            m = merges.get((ids[i], ids[i + 1]))
            if m is not None:
                heap.append((m[0], i, m[1]))
        heapq.heapify(heap)
        while heap:
            _rank, pos, new_id = heapq.heappop(heap)
            if not alive[pos] or nxt[pos] >= n:
                continue
            right = nxt[pos]
            m = merges.get((ids[pos], ids[right]))
            if m is None or m[1] != new_id:
                continue
            ids[pos] = new_id
            alive[right] = False
            nxt[pos] = nxt[right]
            if nxt[pos] < n:
                prev[nxt[pos]] = pos
            if prev[pos] >= 0:
                m = merges.get((ids[prev[pos]], new_id))
                if m is not None:
                    heapq.heappush(heap, (m[0], prev[pos], m[1]))
            if nxt[pos] < n:
                m = merges.get((new_id, ids[nxt[pos]]))
                if m is not None:
                    heapq.heappush(heap, (m[0], pos, m[1]))
        return [ids[i] for i in range(n) if alive[i]]

    def token_to_id(self, token: str) -> int | None:
        return self.vocab.get(token)

    def id_to_token(self, tid: int) -> str | None:
        return self.id_to_str.get(tid)

    @property
    def size(self) -> int:
        return len(self.vocab)
