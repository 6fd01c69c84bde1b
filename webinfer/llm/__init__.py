"""Text models at run time: tokenizers (tokenizer.json, any family: tokenizers/) and the generation loop. Standard library."""

from __future__ import annotations

import json


def load_tokenizer(tokenizer_json: str, config_json: str | None = None):
    """The tokenizer a `tokenizer.json` describes: WordPiece encoders (BERT family) get [CLS] ... [SEP] with
    their attention mask (wordpiece.py); everything else the generic pipeline (tokenizer.py)."""
    from ..errors import WebinferError
    from .tokenizers.jsonfloat import loads

    try:  # (parsed once: the generic pipeline takes it as it is; a big vocabulary's JSON is most of the start)
        spec = loads(tokenizer_json)
    except ValueError as e:
        raise WebinferError(f"tokenizer.json is not valid JSON ({e})") from None
    kind = (spec.get("model") or {}).get("type", "BPE") if isinstance(spec, dict) else None
    if kind == "WordPiece":
        from .wordpiece import WordPieceTokenizer

        try:
            return WordPieceTokenizer.from_json(tokenizer_json)
        except ValueError as e:
            raise WebinferError(f"tokenizer.json: {e}") from None
    from .tokenizer import Tokenizer

    return Tokenizer(spec, json.loads(config_json) if config_json else None)
