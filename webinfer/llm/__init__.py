"""Text models at run time: tokenizers (tokenizer.json, any family: tokenizers/) and the generation loop. Standard library."""

from __future__ import annotations

import json


def load_tokenizer(tokenizer_json: str, config_json: str | None = None):
    """The tokenizer a `tokenizer.json` describes: WordPiece encoders (BERT family) get [CLS] ... [SEP] with
    their attention mask (wordpiece.py); everything else the generic pipeline (tokenizer.py)."""
    from ..errors import WebinferError

    try:
        kind = (json.loads(tokenizer_json).get("model") or {}).get("type", "BPE")
    except ValueError as e:
        raise WebinferError(f"tokenizer.json is not valid JSON ({e})") from None
    if kind == "WordPiece":
        from .wordpiece import WordPieceTokenizer

        try:
            return WordPieceTokenizer.from_json(tokenizer_json)
        except ValueError as e:
            raise WebinferError(f"tokenizer.json: {e}") from None
    from .tokenizer import Tokenizer

    return Tokenizer.from_json(tokenizer_json, config_json)
