"""tokenizer.json in standard-library Python (runs in Pyodide): the `tokenizers` pipeline, component by component.

  uregex.py          Oniguruma patterns on `re` (\\p{..} classes from unicodedata), character tests, graphemes
  normalizers.py     NFC/NFD/NFKC/NFKD, Lowercase, Strip, StripAccents, Replace, Prepend, BertNormalizer, Nmt,
                     Precompiled (charsmap.py: SentencePiece's double-array trie), ByteLevel, Sequence
  pre_tokenizers.py  ByteLevel, Split, Whitespace, WhitespaceSplit, Metaspace, Punctuation, Digits,
                     CharDelimiterSplit, BertPreTokenizer, FixedLength, UnicodeScripts
                     (_scripts.py: tokenizers' own table), Sequence
  bpe.py, models.py  BPE (byte-level and byte-fallback), WordPiece, WordLevel, Unigram
  added.py           added/special tokens (lstrip, rstrip, normalized, single_word)
  processors.py      TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence; truncation, padding
  decoders.py        ByteLevel, Metaspace, WordPiece, BPEDecoder, ByteFallback, Fuse, Strip, Replace, CTC, Sequence
  core.py            Pipeline (encode/decode) and DecodeStream
  _ucompat.py        where tokenizers' Unicode tables (older) differ from ours, generated
  jsonfloat.py       the file read with serde_json's float parsing (Unigram scores equal to the bit)
Whatever else a file holds is refused when it is loaded (`Unsupported`, naming the component), so `webinfer build`
refuses it too (`check`).
"""

from __future__ import annotations

from .core import DecodeStream, Pipeline
from .errors import Malformed, Unsupported
from .jsonfloat import loads

__all__ = ["DecodeStream", "Malformed", "Pipeline", "Unsupported", "check", "loads"]


def check(tokenizer_json: str | bytes) -> Pipeline:
    """Load a tokenizer.json, raising `Unsupported` (one line, naming the component) if it cannot be reproduced
    (`Malformed` if it is no tokenizer.json at all). `webinfer build` calls this on the file it packs."""
    try:
        spec = loads(tokenizer_json)
    except ValueError as e:
        raise Malformed(f"tokenizer.json is not valid JSON ({e})") from None
    try:
        pipeline = Pipeline(spec)
        getattr(getattr(pipeline.model, "merges", None), "check", lambda: None)()  # (BPE's merges: made lazily)
        return pipeline
    except Unsupported:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        raise Malformed(f"tokenizer.json is malformed ({type(e).__name__}: {e})") from None
