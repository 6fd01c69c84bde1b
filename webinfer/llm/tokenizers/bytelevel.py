"""GPT-2's reversible byte <-> printable character table (ByteLevel pre-tokenizer, normalizer and decoder)."""

from __future__ import annotations


def bytes_to_unicode() -> dict[int, str]:
    """Printable Latin-1 bytes map to themselves, the other 68 to U+0100 and up, in byte order."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}
# str.translate table: a Latin-1 decoded string -> byte-level characters, one call per piece.
LATIN1_TO_BYTELEVEL = {b: c for b, c in BYTE_TO_CHAR.items()}


def to_byte_level(text: str) -> str:
    """Each UTF-8 byte of `text` as its printable character."""
    return text.encode("utf-8", "surrogatepass").decode("latin-1").translate(LATIN1_TO_BYTELEVEL)
