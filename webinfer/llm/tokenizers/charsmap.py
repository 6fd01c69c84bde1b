"""SentencePiece's `Precompiled` normalizer: the charsmap (a darts-clone double-array trie plus the replacement
strings) parsed and walked in pure Python, as `tokenizers` (spm_precompiled) does.

Layout of the base64-decoded blob: u32 little-endian trie size in bytes, the trie's u32 units, then the
NUL-separated replacement strings. A lookup walks the trie over the UTF-8 bytes of a grapheme (or a single
character) and takes the FIRST (shortest) key that is a prefix of it; the whole chunk is replaced by that
key's string. Graphemes of 6+ bytes are looked up character by character, as in `tokenizers`.
"""

from __future__ import annotations

import base64
import binascii
import struct
from array import array

from .errors import Unsupported
from .uregex import graphemes


class Charsmap:
    def __init__(self, b64: str) -> None:
        try:
            blob = base64.b64decode(b64)
            (size,) = struct.unpack_from("<I", blob, 0)
        except (binascii.Error, struct.error, TypeError):
            raise Unsupported("normalizer 'Precompiled': precompiled_charsmap is not a charsmap") from None
        if size % 4 or 4 + size > len(blob):
            raise Unsupported("normalizer 'Precompiled': precompiled_charsmap is not a charsmap")
        units = array("I")
        units.frombytes(blob[4:4 + size])
        if struct.pack("=I", 1) != struct.pack("<I", 1):
            units.byteswap()
        self.units = units
        self.strings = blob[4 + size:]
        self._cache: dict[str, str | None] = {}

    def lookup(self, chunk: str) -> str | None:
        """Replacement for `chunk` (its shortest key prefix's string), or None when no key is a prefix."""
        units = self.units
        n = len(units)
        unit = units[0]
        pos = (unit >> 10) << ((unit & 512) >> 6)
        for byte in chunk.encode("utf-8"):
            if byte == 0:
                return None
            pos ^= byte
            if pos >= n:
                return None
            unit = units[pos]
            if unit & 0x800000FF != byte:
                return None
            pos ^= (unit >> 10) << ((unit & 512) >> 6)
            if unit & 256:
                if pos >= n:
                    return None
                start = units[pos] & 0x7FFFFFFF
                end = self.strings.find(b"\0", start)
                raw = self.strings[start:] if end < 0 else self.strings[start:end]
                return raw.decode("utf-8", "replace")
        return None

    def transform(self, chunk: str) -> str | None:
        cache = self._cache
        if chunk in cache:
            return cache[chunk]
        out = cache[chunk] = self.lookup(chunk)
        return out

    def normalize(self, text: str) -> str:
        if text.isascii() and "\r" not in text and all(self.transform(c) is None for c in set(text)):
            return text
        out: list[str] = []
        transform = self.transform
        for g in graphemes(text):
            if len(g) > 1 and len(g.encode("utf-8")) < 6:
                norm = transform(g)
                if norm is not None:
                    out.append(norm)
                    continue
            elif len(g) == 1:
                norm = transform(g)
                out.append(g if norm is None else norm)
                continue
            for c in g:
                norm = transform(c)
                out.append(c if norm is None else norm)
        return "".join(out)
