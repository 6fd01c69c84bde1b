"""Added tokens (tokenizer.json `added_tokens`): cut out of the text before the model sees it, as
`tokenizers`' AddedVocabulary does. Tokens with `normalized: false` are found in the raw text, the others in
each normalized segment; matching is leftmost-longest; `single_word`, `lstrip` and `rstrip` then apply."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from .uregex import WHITE_SPACE, is_word_char

Segment = tuple[str, int | None]  # (text, added token id or None)


class _Matcher:
    """Leftmost-longest search over many literal patterns: candidate positions by first character, then the
    distinct pattern lengths longest first (a regex alternation of thousands of tokens is far slower)."""

    def __init__(self, patterns: dict[str, int]) -> None:
        self.patterns = patterns
        self.first = re.compile("[" + "".join(sorted({re.escape(p[0]) for p in patterns})) + "]")
        self.lengths = sorted({len(p) for p in patterns}, reverse=True)

    def find(self, text: str, start: int) -> tuple[int, int, int] | None:
        patterns, lengths, search = self.patterns, self.lengths, self.first.search
        end = len(text)
        m = search(text, start)
        while m is not None:
            i = m.start()
            for n in lengths:
                if i + n <= end:
                    tid = patterns.get(text[i:i + n])
                    if tid is not None:
                        return i, i + n, tid
            m = search(text, i + 1)
        return None


class AddedVocabulary:
    def __init__(self, tokens: Sequence[Mapping], model, normalizer: Callable[[str], str] | None) -> None:
        self.by_id: dict[int, Mapping] = {}
        self.content_to_id: dict[str, int] = {}
        self.decoded: dict[int, str] = {}
        self.special: set[str] = set()
        next_id = model.size
        for tok in tokens:
            content = tok.get("content", "")
            if not content:
                continue
            tid = self.content_to_id.get(content)
            if tid is None:
                tid = model.token_to_id(content)
            if tid is None:
                tid, next_id = next_id, next_id + 1
            self.content_to_id[content] = tid
            self.by_id[tid] = tok
            if tok.get("special"):
                self.special.add(content)
            self.decoded.pop(tid, None)
            if tok.get("normalized", not tok.get("special")) and normalizer is not None:
                normed = normalizer(content)
                if normed != content:
                    self.decoded[tid] = normed
        raw: dict[str, int] = {}
        normed_patterns: dict[str, int] = {}
        for tid, tok in self.by_id.items():
            if tok.get("normalized", not tok.get("special")):
                pattern = self.decoded.get(tid, tok["content"])
                if pattern:
                    normed_patterns[pattern] = tid
            else:
                raw[tok["content"]] = tid
        self.raw = _Matcher(raw) if raw else None
        self.normalized = _Matcher(normed_patterns) if normed_patterns else None

    def token(self, tid: int) -> str | None:
        """The string a decoder sees for an added token id (None: not an added token)."""
        if tid in self.decoded:
            return self.decoded[tid]
        tok = self.by_id.get(tid)
        return None if tok is None else tok["content"]

    def split(self, text: str, normalized: bool) -> list[Segment]:
        """`text` cut into plain segments (id None) and added tokens, as AddedVocabulary::find_matches."""
        matcher = self.normalized if normalized else self.raw
        if matcher is None or not text:
            return [(text, None)]
        out: list[Segment] = []
        done = 0  # end of what is already emitted
        at = 0  # where the next search starts (the end of the previous match, as aho-corasick continues)
        while True:
            hit = matcher.find(text, at)
            if hit is None:
                break
            start, stop, tid = hit
            at = stop
            tok = self.by_id[tid]
            if tok.get("single_word"):
                start_ok = start == 0 or not is_word_char(text[start - 1])
                stop_ok = stop == len(text) or not is_word_char(text[stop])
                if not (start_ok and stop_ok):
                    continue
            if tok.get("lstrip"):
                start = max(len(text[:start].rstrip(WHITE_SPACE)), done)
            if tok.get("rstrip"):
                rest = text[stop:]
                stop += len(rest) - len(rest.lstrip(WHITE_SPACE))
            if done < start:
                out.append((text[done:start], None))
            out.append((text[start:stop], tid))
            done = stop
        if done != len(text):
            out.append((text[done:], None))
        return out
