"""WordPiece, WordLevel and Unigram models of tokenizer.json (BPE lives in bpe.py), and `build`."""

from __future__ import annotations

from collections.abc import Mapping

from .bpe import BPE, CACHE_PIECE, CACHE_SIZE
from .errors import Unsupported

_UNK_PENALTY = 10.0


class _Vocab:
    vocab: dict[str, int]
    id_to_str: dict[int, str]

    def token_to_id(self, token: str) -> int | None:
        return self.vocab.get(token)

    def id_to_token(self, tid: int) -> str | None:
        return self.id_to_str.get(tid)

    @property
    def size(self) -> int:
        return len(self.vocab)


class WordPiece(_Vocab):
    """Greedy longest match from the left; a word with an unmatched rest, or too long, is the unknown token."""

    def __init__(self, spec: Mapping) -> None:
        self.vocab = dict(spec["vocab"])
        self.id_to_str = {i: t for t, i in self.vocab.items()}
        self.prefix = spec.get("continuing_subword_prefix", "##") or ""
        self.max_chars = int(spec.get("max_input_chars_per_word", 100))
        unk = spec.get("unk_token", "[UNK]")
        if unk not in self.vocab:
            raise Unsupported(f"model 'WordPiece': unk_token {unk!r} is not in the vocabulary")
        self.unk_id = self.vocab[unk]
        self._cache: dict[str, list[int]] = {}

    def tokenize(self, word: str) -> list[int]:
        hit = self._cache.get(word)
        if hit is not None:
            return hit
        if len(word) > self.max_chars:
            return [self.unk_id]
        ids: list[int] = []
        start, vocab = 0, self.vocab
        while start < len(word):
            end, found = len(word), None
            while start < end:
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                found = vocab.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                ids = [self.unk_id]
                break
            ids.append(found)
            start = end
        if len(word) <= CACHE_PIECE and len(self._cache) < CACHE_SIZE:
            self._cache[word] = ids
        return ids


class WordLevel(_Vocab):
    def __init__(self, spec: Mapping) -> None:
        self.vocab = dict(spec["vocab"])
        self.id_to_str = {i: t for t, i in self.vocab.items()}
        unk = spec.get("unk_token")
        self.unk_id = self.vocab.get(unk) if unk is not None else None

    def tokenize(self, word: str) -> list[int]:
        tid = self.vocab.get(word, self.unk_id)
        if tid is None:
            raise ValueError(f"WordLevel: {word!r} is not in the vocabulary and there is no unknown token")
        return [tid]


class Unigram(_Vocab):
    """SentencePiece's Viterbi segmentation (encode_optimized in `tokenizers`): best total score, ties to the
    first path found; characters no piece covers score min_score - 10 as the unknown token, runs of unknowns
    fused into one."""

    def __init__(self, spec: Mapping) -> None:
        pieces = spec.get("vocab") or []
        self.pieces = [(str(t), float(s)) for t, s in pieces]
        self.vocab = {}
        for i, (t, _s) in enumerate(self.pieces):
            self.vocab[t] = i
        self.id_to_str = {i: t for i, (t, _s) in enumerate(self.pieces)}
        self.scores = {t: (i, self.pieces[i][1]) for t, i in self.vocab.items()}
        self.unk_id = spec.get("unk_id")
        if self.unk_id is not None and not 0 <= self.unk_id < len(self.pieces):
            raise Unsupported("model 'Unigram': unk_id outside the vocabulary")
        self.byte_fallback = bool(spec.get("byte_fallback"))
        self.min_score = min((s for _t, s in self.pieces), default=0.0)
        self.lengths = sorted({len(t) for t, _s in self.pieces if t})
        self._cache: dict[str, list[int]] = {}

    def _segment(self, text: str) -> list[str]:
        n = len(text)
        scores, lengths = self.scores, self.lengths
        unk_score = self.min_score - _UNK_PENALTY
        best = [0.0] * (n + 1)
        start_at = [-1] * (n + 1)
        ident = [0] * (n + 1)
        for i in range(n):
            here = best[i]
            single = False
            for length in lengths:
                j = i + length
                if j > n:
                    break
                hit = scores.get(text[i:j])
                if hit is None:
                    continue
                cand = hit[1] + here
                if start_at[j] < 0 or cand > best[j]:
                    best[j], start_at[j], ident[j] = cand, i, hit[0]
                if length == 1:
                    single = True
            if not single:
                j = i + 1
                cand = unk_score + here
                if start_at[j] < 0 or cand > best[j]:
                    if self.unk_id is None:
                        raise ValueError("Unigram: a character no piece covers and no unknown token")
                    best[j], start_at[j], ident[j] = cand, i, self.unk_id
        out: list[str] = []
        unk_run: list[str] = []
        end = n
        while end > 0:
            start = start_at[end]
            if ident[end] == self.unk_id:
                unk_run.append(text[start:end])
            else:
                if unk_run:
                    out.append("".join(reversed(unk_run)))
                    unk_run = []
                out.append(text[start:end])
            end = start
        if unk_run:
            out.append("".join(reversed(unk_run)))
        out.reverse()
        return out

    def tokenize(self, piece: str) -> list[int]:
        if not piece:
            return []
        hit = self._cache.get(piece)
        if hit is not None:
            return hit
        ids: list[int] = []
        for s in self._segment(piece):
            tid = self.vocab.get(s)
            if tid is None and self.byte_fallback:
                byte_ids = [self.vocab.get(f"<0x{b:02X}>") for b in s.encode("utf-8")]
                if None not in byte_ids:
                    ids += byte_ids  # type: ignore[arg-type]
                    continue
            if tid is None:
                if self.unk_id is None:
                    raise ValueError("Unigram: no unknown token")
                tid = self.unk_id
            ids.append(tid)
        if len(piece) <= CACHE_PIECE and len(self._cache) < CACHE_SIZE:
            self._cache[piece] = ids
        return ids


def build(spec: Mapping):
    kind = spec.get("type")
    if kind is None:  # untyped models: tell them apart as `tokenizers` does, by their fields
        kind = "BPE" if "merges" in spec else "Unigram" if isinstance(spec.get("vocab"), list) else "WordPiece" \
            if "continuing_subword_prefix" in spec or "max_input_chars_per_word" in spec else "WordLevel"
    if kind == "BPE":
        return BPE(spec)
    if kind == "WordPiece":
        return WordPiece(spec)
    if kind == "WordLevel":
        return WordLevel(spec)
    if kind == "Unigram":
        return Unigram(spec)
    raise Unsupported(f"model {kind!r}")
