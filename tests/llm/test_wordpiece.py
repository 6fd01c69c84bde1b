"""The standard-library WordPiece tokenizer (webinfer.llm.wordpiece) gives the same ids as Hugging Face's
`tokenizers` on all-MiniLM-L6-v2's tokenizer.json, over ~3,500 varied strings (the byte-level corpus plus
BERT cases: accents, CJK, added tokens, over-long words, truncation)."""

from __future__ import annotations

import random

import pytest
from tokenizer_corpus import SCRIPTS, build_corpus

from webinfer.llm.wordpiece import WordPieceTokenizer

BERT_CASES = [
    "[CLS] hello [SEP]", "a[MASK]b", "[UNK][PAD]", "[cls] lower", "Héllo WÖRLD, çà et là!", "İstanbul ǅ ﬁ",
    "中文字符和English混合", "日本語テキスト", "한국어", "𠀀𠀁 ext-B", "\u0301\u0302 marks only", "x" * 100, "x" * 101,
    "supercalifragilisticexpialidocious " * 3, "unaffable", "naïve café", "$5 + 3 = 8 ^ ~ | ` <>",
    "“smart” ‘quotes’ – — …", "\u200b\u200d\ufeff zero width", "a\x00b\x85c\x1fd", "tab\tnew\nline\rcr",
    "ＡＢＣ１２３", "e\u0301", "Ω ω Ä ä", " ".join(["word"] * 300),
]


@pytest.fixture(scope="module")
def tokenizers_pair(minilm_tokenizer_json):
    from tokenizers import Tokenizer

    ref = Tokenizer.from_file(minilm_tokenizer_json)
    ref.no_padding()
    return WordPieceTokenizer.from_file(minilm_tokenizer_json), ref


@pytest.fixture(scope="module")
def minilm_tokenizer_json():
    from webinfer.models import export_minilm

    return str(export_minilm() / "tokenizer.json")


def corpus() -> list[str]:
    rng = random.Random(7)
    extra = ["".join(rng.choice(SCRIPTS + BERT_CASES + [" ", "-", "##", "'"]) for _ in range(rng.randint(1, 5)))
             for _ in range(300)]
    return build_corpus() + BERT_CASES + extra


def test_ids_equal_tokenizers_on_corpus(tokenizers_pair):
    ours, ref = tokenizers_pair
    texts = corpus()
    assert len(texts) > 3000
    want = ref.encode_batch(texts)
    bad = [(t, w.ids, ours.encode(t).ids) for t, w in zip(texts, want) if ours.encode(t).ids != w.ids]
    assert not bad, f"{len(bad)} of {len(texts)} differ; first: {bad[0]!r}"


def test_truncation_and_masks(tokenizers_pair):
    ours, ref = tokenizers_pair
    text = " ".join(f"w{i}" for i in range(400))
    enc = ours.encode(text)
    assert enc.ids == ref.encode(text).ids and len(enc.ids) == ours.max_length
    assert enc.attention_mask == [1] * len(enc.ids) and enc.type_ids == [0] * len(enc.ids)
    assert ours.encode("hi", add_special_tokens=False).ids == ref.encode("hi", add_special_tokens=False).ids


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="not a WordPiece"):
        WordPieceTokenizer({"model": {"type": "BPE"}})
    tok = WordPieceTokenizer({"model": {"type": "WordPiece", "vocab": {"[UNK]": 0, "a": 1}}})
    assert tok.encode("a b").ids == [1, 0]
    with pytest.raises(TypeError, match="expects a str"):
        tok.encode(b"bytes")


def test_every_code_point_in_context(tokenizers_pair):
    """Each assigned code point (one in 5, plus all in the compat table) between letters and at a word end."""
    import unicodedata

    from webinfer.llm._wordpiece_compat import RANGES

    ours, ref = tokenizers_pair
    cps = set(range(0, 0x110000, 5)) | {cp for lo, hi, _ in RANGES for cp in range(lo, hi + 1)} | {0x3A3}
    texts = [f"a{chr(cp)}b x{chr(cp)}" for cp in sorted(cps)
             if not 0xD800 <= cp < 0xE000 and unicodedata.category(chr(cp)) != "Cn"]
    bad = [(hex(ord(t[1])), w.ids, ours.encode(t).ids) for t, w in zip(texts, ref.encode_batch(texts))
           if ours.encode(t).ids != w.ids]
    assert not bad, f"{len(bad)} code points differ, first: {bad[:3]}"
