"""Decoders of tokenizer.json: each maps a list of token strings to a list of strings (`decode_chain` in
`tokenizers`); the text is their concatenation."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .bytelevel import CHAR_TO_BYTE
from .errors import Unsupported
from .normalizers import replace_pattern

Decoder = Callable[[list[str]], list[str]]
_HEX = frozenset("0123456789abcdefABCDEF")


def byte_level_bytes(token: str) -> bytes:
    """A token's bytes: its byte-level characters mapped back, or its own UTF-8 when one is not byte-level
    (added tokens such as `<|im_end|>`)."""
    try:
        return bytes(CHAR_TO_BYTE[c] for c in token)
    except KeyError:
        return token.encode("utf-8")


def _byte_level(_spec: Mapping) -> Decoder:
    return lambda tokens: [b"".join(byte_level_bytes(t) for t in tokens).decode("utf-8", "replace")]


def _metaspace(spec: Mapping) -> Decoder:
    rep = str(spec.get("replacement", "\u2581"))
    scheme = str(spec.get("prepend_scheme", "always")).lower()
    if spec.get("add_prefix_space") is False:
        scheme = "never"
    strip_first = scheme != "never"
    return lambda tokens: [t.replace(rep, "" if i == 0 and strip_first else " ") for i, t in enumerate(tokens)]


def cleanup(text: str) -> str:
    for a, b in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                 (" 'm", "'m"), (" do not", " don't"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(a, b)
    return text


def _wordpiece(spec: Mapping) -> Decoder:
    prefix, clean = str(spec.get("prefix", "##")), bool(spec.get("cleanup", True))

    def run(tokens: list[str]) -> list[str]:
        out = []
        for i, t in enumerate(tokens):
            if i:
                t = t[len(prefix):] if t.startswith(prefix) else " " + t
            out.append(cleanup(t) if clean else t)
        return out
    return run


def _bpe(spec: Mapping) -> Decoder:
    suffix = str(spec.get("suffix", "</w>"))
    return lambda tokens: [t.replace(suffix, "" if i == len(tokens) - 1 else " ") for i, t in enumerate(tokens)]


def _byte_fallback(_spec: Mapping) -> Decoder:
    def flush(pending: bytearray, out: list[str]) -> None:
        try:
            out.append(pending.decode("utf-8"))
        except UnicodeDecodeError:
            out += ["\ufffd"] * len(pending)
        pending.clear()

    def run(tokens: list[str]) -> list[str]:
        out: list[str] = []
        pending = bytearray()
        for t in tokens:
            byte = None
            if len(t) == 6 and t.startswith("<0x") and t.endswith(">") and all(c in _HEX for c in t[3:5]):
                byte = int(t[3:5], 16)
            if byte is not None:
                pending.append(byte)
                continue
            if pending:
                flush(pending, out)
            out.append(t)
        if pending:
            flush(pending, out)
        return out
    return run


def _fuse(_spec: Mapping) -> Decoder:
    return lambda tokens: ["".join(tokens)]


def _strip(spec: Mapping) -> Decoder:
    content, start, stop = str(spec["content"]), int(spec.get("start", 0)), int(spec.get("stop", 0))

    def one(t: str) -> str:
        a = 0
        for i in range(min(start, len(t))):
            if t[i] != content:
                break
            a = i + 1
        b = len(t)
        for i in range(min(stop, len(t))):
            k = len(t) - i - 1
            if t[k] != content:
                break
            b = k
        return t[a:b] if a <= b else ""
    return lambda tokens: [one(t) for t in tokens]


def _replace(spec: Mapping) -> Decoder:
    regex, content = replace_pattern(spec, "decoder"), str(spec.get("content", ""))
    return lambda tokens: [regex.sub(lambda _m: content, t) for t in tokens]


def _ctc(spec: Mapping) -> Decoder:
    pad, delim = str(spec.get("pad_token", "<pad>")), str(spec.get("word_delimiter_token", "|"))
    clean = bool(spec.get("cleanup", True))

    def run(tokens: list[str]) -> list[str]:
        out = []
        for i, t in enumerate(tokens):
            if i and tokens[i - 1] == t:
                continue
            t = t.replace(pad, "")
            if clean:
                t = cleanup(t).replace(delim, " ")
            if t:
                out.append(t)
        return out
    return run


def _sequence(spec: Mapping) -> Decoder:
    steps = [build(s) for s in spec.get("decoders", [])]

    def run(tokens: list[str]) -> list[str]:
        for step in steps:
            if step is not None:
                tokens = step(tokens)
        return tokens
    return run


_BUILDERS: dict[str, Callable[[Mapping], Decoder]] = {
    "ByteLevel": _byte_level, "Metaspace": _metaspace, "WordPiece": _wordpiece, "BPEDecoder": _bpe,
    "ByteFallback": _byte_fallback, "Fuse": _fuse, "Strip": _strip, "Replace": _replace, "CTC": _ctc,
    "Sequence": _sequence,
}


def build(spec: Mapping | None) -> Decoder | None:
    if spec is None:
        return None
    kind = spec.get("type")
    if kind not in _BUILDERS:
        raise Unsupported(f"decoder {kind!r}")
    return _BUILDERS[kind](spec)
