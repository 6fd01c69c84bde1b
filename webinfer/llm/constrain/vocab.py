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


SHORT = 12  # tokens up to this many bytes go in the trie; the few longer ones are checked one by one


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
        self.long: list[tuple[int, bytes]] = []
        self.bytes: dict[int, bytes] = {}
        for i, s in strings.items():
            data = _token_bytes(s, byte_level)
            if data:
                self.bytes[i] = data
                if len(data) <= SHORT:
                    self._insert(data, i)
                else:
                    self.long.append((i, data))
        self._index()

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

    def _index(self) -> None:
        """Each node's tokens as a range of ``order`` (its subtree's, depth first) and the bytes below it."""
        n = len(self.children)
        self.order: list[int] = []
        self.lo, self.hi = [0] * n, [0] * n
        todo = [(0, False)]
        while todo:
            node, done = todo.pop()
            if done:
                self.hi[node] = len(self.order)
                continue
            self.lo[node] = len(self.order)
            self.order += self.ids[node]
            todo.append((node, True))
            todo += [(c, False) for c in self.children[node].values()]
        self.below = [0] * n
        self.height = [0] * n  # the most bytes below a node
        for node in range(n - 1, -1, -1):  # children are made after their parent
            m, h = 0, 0
            for b, c in self.children[node].items():
                m |= (1 << b) | self.below[c]
                h = max(h, 1 + self.height[c])
            self.below[node], self.height[node] = m, h

    def allowed(self, machine, state: int, chain) -> list[int]:
        """The short tokens whose bytes lead ``machine`` from ``state`` to a live state. ``chain(s)``: a byte set
        and a depth such that every string of at most that many of those bytes keeps ``s`` live (a string's
        characters counted towards its maxLength, or a loop); a subtree within both is taken whole."""
        rows, fill = machine.rows, machine.fill
        children, ids, below, order, lo, hi = self.children, self.ids, self.below, self.order, self.lo, self.hi
        height = self.height
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
                if not children[child]:
                    out += ids[child]
                elif below[child] & ~(c := chain(t))[0] == 0 and height[child] <= c[1]:
                    out += order[lo[child]:hi[child]]
                else:
                    out += ids[child]
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
    """Per-state allowed-token bitmasks (u32 words, bit i % 32 of word i // 32), computed once per state. A DFA's
    states that agree on every string of ``SHORT`` bytes share the trie walk (a string of maxLength n has n
    states, most of them alike for short tokens); the long tokens are checked per state."""

    def __init__(self, machine, vocab: Vocabulary) -> None:
        self.machine = machine
        self.vocab = vocab
        self._cache: dict[int, tuple[array, bool]] = {}
        self._short: dict[int, array] = {}
        self._chains: dict[int, tuple[int, int]] = {}

    def chain(self, state: int) -> tuple[int, int]:
        """(bytes, depth): the bytes that all lead ``state`` to one next state, and how many steps (up to
        ``SHORT``) those same bytes keep leading every state on the way to one live next state."""
        got = self._chains.get(state)
        if got is None:
            step = self.machine.step
            targets: dict[int, int] = {}
            for b in range(256):
                t = step(state, b)
                if t >= 0:
                    targets[t] = targets.get(t, 0) | (1 << b)
            if not targets:
                got = (0, 0)
            else:
                nxt, bits = max(targets.items(), key=lambda kv: bin(kv[1]).count("1"))
                members = [b for b in range(256) if bits >> b & 1]
                depth, s = 1, nxt
                while depth < SHORT:
                    after = {step(s, b) for b in members}
                    if len(after) != 1 or -1 in after:
                        break
                    s2 = after.pop()
                    depth += 1
                    if s2 == s:  # a loop: any depth
                        depth = SHORT
                        break
                    s = s2
                got = (bits, depth)
            self._chains[state] = got
        return got

    def _short_words(self, state: int) -> array:
        classes = self.machine.short_classes(SHORT) if hasattr(self.machine, "short_classes") else None
        key = classes[state] if classes is not None else state
        words = self._short.get(key)
        if words is None:
            words = array("I", bytes(4 * ((self.vocab.size + 31) // 32)))
            for t in self.vocab.allowed(self.machine, state, self.chain):
                words[t >> 5] |= 1 << (t & 31)
            self._short[key] = words
        return words

    def words(self, state: int) -> tuple[array, bool]:
        """(the mask, whether any non-EOS token is allowed)."""
        got = self._cache.get(state)
        if got is None:
            m = self.machine
            words = array("I", self._short_words(state))
            for t, data in self.vocab.long:
                s = state
                for b in data:
                    r = m.rows[s][b]
                    s = m.fill(s, b) if r == -2 else r
                    if s < 0:
                        break
                else:
                    words[t >> 5] |= 1 << (t & 31)
            any_token = any(words)
            eos = self.vocab.eos
            if m.accepting(state) and eos is not None:
                words[eos >> 5] |= 1 << (eos & 31)
            if not any_token and not m.accepting(state):
                raise ConstraintError("no token of the vocabulary continues the constraint here")
            got = self._cache[state] = (words, any_token)
        return got
