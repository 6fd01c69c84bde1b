"""The token level: which of the model's tokens an automaton state allows, as a GPU bitmask.

Every token is its bytes (byte-level BPE: the byte alphabet inverted; SentencePiece: ``▁`` a space and
``<0xHH>`` a byte), so a token that ends in the middle of a UTF-8 character is walked like any other.
The tokens form a byte trie; a state's allowed set is a walk of the trie that follows the automaton and
prunes every branch it kills (one visit per trie node the state can reach), cached per state. Special and
added tokens are never allowed, but the end-of-sequence token is, in accepting states only.
"""

from __future__ import annotations

from array import array

from ..tokenizers.bytelevel import bytes_to_unicode
from ..tokenizers.decoders import byte_level_bytes
from .automaton import ConstraintError

_BYTE_CHARS = set(bytes_to_unicode().values())


class Vocabulary:
    """The tokens of one tokenizer as bytes, in a trie. Built once per tokenizer (``of``)."""

    def __init__(self, tokenizer) -> None:
        self.size = tokenizer.vocab_size
        self.eos = tokenizer.eos_token_id
        added = set(tokenizer.pipeline.added.by_id)
        strings = {i: tokenizer.id_to_token(i) for i in range(self.size) if i not in added}
        strings = {i: s for i, s in strings.items() if s}
        byte_level = sum(all(c in _BYTE_CHARS for c in s) for s in strings.values()) > 0.99 * max(len(strings), 1)
        self.children: list[dict[int, int]] = [{}]
        self.ids: list[list[int]] = [[]]
        for i, s in strings.items():
            data = _token_bytes(s, byte_level)
            if data:
                self._insert(data, i)

    @classmethod
    def of(cls, tokenizer) -> "Vocabulary":
        vocab = getattr(tokenizer, "_constrain_vocabulary", None)
        if vocab is None:
            vocab = cls(tokenizer)
            tokenizer._constrain_vocabulary = vocab
        return vocab

    def _insert(self, data: bytes, token: int) -> None:
        node = 0
        for b in data:
            nxt = self.children[node].get(b)
            if nxt is None:
                nxt = len(self.children)
                self.children[node][b] = nxt
                self.children.append({})
                self.ids.append([])
            node = nxt
        self.ids[node].append(token)

    def token_bytes(self) -> dict[int, bytes]:
        """Token id -> bytes, for every token a constraint may allow."""
        out, todo = {}, [(0, b"")]
        while todo:
            node, prefix = todo.pop()
            for t in self.ids[node]:
                out[t] = prefix
            todo += [(c, prefix + bytes([b])) for b, c in self.children[node].items()]
        return out

    def allowed(self, machine, state: int) -> list[int]:
        """The tokens whose bytes lead ``machine`` from ``state`` to a live state."""
        rows, fill = machine.rows, machine.fill
        children, ids = self.children, self.ids
        out: list[int] = []
        todo = [(0, state)]
        while todo:
            node, st = todo.pop()
            row = rows[st]
            for b, child in children[node].items():
                t = row[b]
                if t == -2:
                    t = fill(st, b)
                if t < 0:
                    continue
                if ids[child]:
                    out += ids[child]
                if children[child]:
                    todo.append((child, t))
        return out


def _token_bytes(s: str, byte_level: bool) -> bytes | None:
    if byte_level:
        try:
            return byte_level_bytes(s)
        except (KeyError, ValueError):
            return None
    if len(s) == 6 and s.startswith("<0x") and s.endswith(">"):
        try:
            return bytes([int(s[3:5], 16)])
        except ValueError:
            return None
    return s.replace("\u2581", " ").encode("utf-8")


class Masks:
    """Per-state allowed-token bitmasks (u32 words, bit i % 32 of word i // 32), computed once per state."""

    def __init__(self, machine, vocab: Vocabulary) -> None:
        self.machine = machine
        self.vocab = vocab
        self._cache: dict[int, tuple[array, bool]] = {}

    def words(self, state: int) -> tuple[array, bool]:
        """(the mask, whether any non-EOS token is allowed)."""
        got = self._cache.get(state)
        if got is None:
            allowed = self.vocab.allowed(self.machine, state)
            words = array("I", bytes(4 * ((self.vocab.size + 31) // 32)))
            for t in allowed:
                words[t >> 5] |= 1 << (t & 31)
            eos = self.vocab.eos
            if self.machine.accepting(state) and eos is not None:
                words[eos >> 5] |= 1 << (eos & 31)
            if not allowed and not self.machine.accepting(state):
                raise ConstraintError("no token of the vocabulary continues the constraint here")
            got = self._cache[state] = (words, bool(allowed))
        return got
