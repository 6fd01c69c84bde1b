"""Every normalizer, pre-tokenizer, decoder, post-processor and model option of tokenizer.json, one by one,
against the `tokenizers` package: each component is built with the `tokenizers` Python API, serialized, read by
webinfer.llm.tokenizers, and both are run on the same inputs."""

from __future__ import annotations

import json
import random

import pytest
import tokenizer_families as families
from tokenizer_corpus import LONG, build_corpus
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from webinfer.errors import WebinferError
from webinfer.llm.tokenizer import Tokenizer as Ours
from webinfer.llm.tokenizers import Pipeline, Unsupported, check, loads
from webinfer.llm.tokenizers import decoders as our_decoders
from webinfer.llm.tokenizers import normalizers as our_normalizers
from webinfer.llm.tokenizers import pre_tokenizers as our_pre

CORPUS = build_corpus(n_random=700, seed=4321, specials=["<s>"]) + LONG[:6]


def serialized(**parts) -> dict:
    """The tokenizer.json entries `tokenizers` writes for the given components."""
    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    for key, value in parts.items():
        setattr(tok, key, value)
    return json.loads(tok.to_str())


NORMALIZERS = {
    "NFC": normalizers.NFC(), "NFD": normalizers.NFD(), "NFKC": normalizers.NFKC(), "NFKD": normalizers.NFKD(),
    "Lowercase": normalizers.Lowercase(), "Strip": normalizers.Strip(), "StripLeft": normalizers.Strip(right=False),
    "StripRight": normalizers.Strip(left=False), "StripAccents": normalizers.StripAccents(),
    "Replace": normalizers.Replace(" ", "\u2581"), "ReplaceRegex": normalizers.Replace(Regex(r"\s+"), " "),
    "ReplacePunct": normalizers.Replace(Regex(r"[\p{P}\p{S}]+"), "#"), "Prepend": normalizers.Prepend("\u2581"),
    "Bert": normalizers.BertNormalizer(), "BertCased": normalizers.BertNormalizer(lowercase=False),
    "BertAccents": normalizers.BertNormalizer(lowercase=False, strip_accents=True, handle_chinese_chars=False),
    "Precompiled": normalizers.Precompiled(families.charsmap()), "Nmt": normalizers.Nmt(),
    "ByteLevel": normalizers.ByteLevel(),
    "Sequence": normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase()]),
}


@pytest.mark.parametrize("name", NORMALIZERS)
def test_normalizer(name):
    ref = NORMALIZERS[name]
    ours = our_normalizers.build(serialized(normalizer=ref)["normalizer"])
    bad = [t for t in CORPUS if ours(t) != ref.normalize_str(t)]
    assert not bad, f"{name}: {len(bad)} differ, e.g. {[(t[:40], ours(t)[:40], ref.normalize_str(t)[:40]) for t in bad[:3]]}"


def test_precompiled_changes_text():
    """The charsmap really rewrites: NFKC folding, CRLF as one grapheme, combining sequences composed."""
    ref = NORMALIZERS["Precompiled"]
    ours = our_normalizers.build(serialized(normalizer=ref)["normalizer"])
    for text in ["ﬁ ½ Ｆｕｌｌ", "a\r\nb", "e\u0301", "\u00a0\u0301", "ｶﾞ", "①"]:
        assert ours(text) == ref.normalize_str(text) != text, text


PRE_TOKENIZERS = {
    "ByteLevel": pre_tokenizers.ByteLevel(add_prefix_space=False),
    "ByteLevelPrefix": pre_tokenizers.ByteLevel(add_prefix_space=True),
    "ByteLevelNoRegex": pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    "Whitespace": pre_tokenizers.Whitespace(), "WhitespaceSplit": pre_tokenizers.WhitespaceSplit(),
    "MetaspaceAlways": pre_tokenizers.Metaspace(), "MetaspaceFirst": pre_tokenizers.Metaspace(prepend_scheme="first"),
    "MetaspaceNever": pre_tokenizers.Metaspace(prepend_scheme="never", split=False),
    "MetaspaceNoSplit": pre_tokenizers.Metaspace(split=False),
    "Punctuation": pre_tokenizers.Punctuation(), "PunctuationNext": pre_tokenizers.Punctuation("merged_with_next"),
    "Digits": pre_tokenizers.Digits(), "DigitsIndividual": pre_tokenizers.Digits(individual_digits=True),
    "CharDelimiterSplit": pre_tokenizers.CharDelimiterSplit("a"), "Bert": pre_tokenizers.BertPreTokenizer(),
    "FixedLength": pre_tokenizers.FixedLength(length=3), "UnicodeScripts": pre_tokenizers.UnicodeScripts(),
    "Sequence": pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Digits()]),
}
for _behavior in ["removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"]:
    for _invert in (False, True):
        PRE_TOKENIZERS[f"SplitLlama3-{_behavior}-{_invert}"] = pre_tokenizers.Split(
            Regex(families.LLAMA3_SPLIT), _behavior, _invert)
    PRE_TOKENIZERS[f"SplitString-{_behavior}"] = pre_tokenizers.Split(" ", _behavior)
PRE_TOKENIZERS["SplitQwen2"] = pre_tokenizers.Split(Regex(families.QWEN2_SPLIT), "isolated")
PRE_TOKENIZERS["SplitO200k"] = pre_tokenizers.Split(Regex(families.O200K_SPLIT), "isolated")
PRE_TOKENIZERS["SplitClasses"] = pre_tokenizers.Split(Regex(r"\p{Lu}\p{Ll}*|[^\P{N}]+|\w+|\d|\S|\s+"), "isolated")


@pytest.mark.parametrize("name", PRE_TOKENIZERS)
def test_pre_tokenizer(name):
    ref = PRE_TOKENIZERS[name]
    ours = our_pre.build(serialized(pre_tokenizer=ref)["pre_tokenizer"])
    bad = []
    for t in CORPUS:
        got = [p for p, _ in ours([(t, True)])]
        want = [p for p, _ in ref.pre_tokenize_str(t)]
        if got != want:
            bad.append((t[:40], got[:6], want[:6]))
    assert not bad, f"{name}: {len(bad)} differ, e.g. {bad[:3]}"


TOKEN_POOL = (["\u2581the", "\u2581", "\u2581\u2581", "cat", "##s", "##ing", "un", "</w>", "ing</w>", "<pad>", "|",
               " .", " ,", " n't", " 'm", " 's", " do not", "a", "Ġhello", "Ċ", "ĠĠ", "Ã©", "ðŁĺ", "Ģ", "<0x41>",
               "<0xE4>", "<0xBD>", "<0xA0>", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>", "<0xZZ>", "<0x4", "<s>", "’",
               "日本", "x", "  ", "\u2581x\u2581"] + [f"<0x{b:02X}>" for b in range(0x80, 0xC0, 7)])
DECODERS = {
    "ByteLevel": decoders.ByteLevel(), "Metaspace": decoders.Metaspace(),
    "MetaspaceNever": decoders.Metaspace(prepend_scheme="never"), "WordPiece": decoders.WordPiece(),
    "WordPieceRaw": decoders.WordPiece(cleanup=False), "BPEDecoder": decoders.BPEDecoder(),
    "ByteFallback": decoders.ByteFallback(), "Fuse": decoders.Fuse(), "Strip": decoders.Strip("\u2581", 1, 1),
    "Replace": decoders.Replace("\u2581", " "), "CTC": decoders.CTC(), "CTCRaw": decoders.CTC(cleanup=False),
    "Sequence": decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                   decoders.Strip(" ", 1, 0)]),
}


@pytest.mark.parametrize("name", DECODERS)
def test_decoder(name):
    ref = DECODERS[name]
    ours = our_decoders.build(serialized(decoder=ref)["decoder"])
    rng = random.Random(len(name))
    lists = [[rng.choice(TOKEN_POOL) for _ in range(rng.randint(1, 8))] for _ in range(1500)]
    lists += [["a"], ["<pad>", "<pad>", "a", "a", "|", "b"], ["\u2581\u2581a"], ["x", "\u2581"]]
    bad, checked = [], 0
    for ts in lists:
        try:
            want = ref.decode(ts)
        except BaseException:  # tokenizers panics on some inputs (Strip cutting past the end): nothing to compare
            continue
        checked += 1
        if "".join(ours(ts)) != want:
            bad.append((ts, "".join(ours(ts)), want))
    assert checked > 1000
    assert not bad, f"{name}: {len(bad)} differ, e.g. {bad[:3]}"


def _wordpiece_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer()
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(families.training_text(), trainers.WordPieceTrainer(
        vocab_size=1500, special_tokens=["[UNK]", "[CLS]", "[SEP]", "[PAD]", "<s>", "</s>"], show_progress=False))
    return tok


@pytest.fixture(scope="module")
def wordpiece() -> Tokenizer:
    return _wordpiece_tokenizer()


def _ids(tok: Tokenizer, *names: str) -> list[tuple[str, int]]:
    return [(n, tok.token_to_id(n)) for n in names]


POST = {
    "Template": lambda t: processors.TemplateProcessing(single="[CLS] $A [SEP] [SEP]", pair="$A $B",
                                                        special_tokens=_ids(t, "[CLS]", "[SEP]")),
    "TemplateEnd": lambda t: processors.TemplateProcessing(single="$0 </s>", special_tokens=_ids(t, "</s>")),
    "Bert": lambda t: processors.BertProcessing(("[SEP]", t.token_to_id("[SEP]")), ("[CLS]", t.token_to_id("[CLS]"))),
    "Roberta": lambda t: processors.RobertaProcessing(("</s>", t.token_to_id("</s>")), ("<s>", t.token_to_id("<s>"))),
    "ByteLevel": lambda t: processors.ByteLevel(),
    "Sequence": lambda t: processors.Sequence([processors.ByteLevel(), processors.TemplateProcessing(
        single="<s> $A", special_tokens=_ids(t, "<s>"))]),
}


@pytest.mark.parametrize("name", POST)
@pytest.mark.parametrize("limits", ["none", "truncate", "truncate-left-pad"])
def test_post_processor_truncation_padding(wordpiece, name, limits):
    tok = Tokenizer.from_str(wordpiece.to_str())
    tok.post_processor = POST[name](tok)
    if limits != "none":
        tok.enable_truncation(max_length=9, direction="left" if "left" in limits else "right")
    if "pad" in limits:
        tok.enable_padding(length=12, pad_id=3, direction="left", pad_to_multiple_of=5)
    ours = Pipeline(loads(tok.to_str()))
    for text in CORPUS[:400]:
        for add in (True, False):
            assert ours.encode(text, add) == tok.encode(text, add_special_tokens=add).ids, (name, text, add)


def _bpe(**options) -> Tokenizer:
    tok = Tokenizer(models.BPE(**{k: v for k, v in options.items() if k in ("unk_token", "fuse_unk")}))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(families.training_text(), trainers.BpeTrainer(
        vocab_size=1200, limit_alphabet=150, special_tokens=["<unk>"], show_progress=False,
        **{k: v for k, v in options.items() if k in ("continuing_subword_prefix", "end_of_word_suffix")}))
    return tok


MODELS = {
    "BPE-prefix-suffix": lambda: _bpe(continuing_subword_prefix="##", end_of_word_suffix="</w>", unk_token="<unk>"),
    "BPE-unk": lambda: _bpe(unk_token="<unk>"),
    "BPE-fused-unk": lambda: _bpe(unk_token="<unk>", fuse_unk=True),
    "BPE-no-unk": lambda: _bpe(),
    "WordLevel": lambda: _wordlevel(),
}


def _wordlevel() -> Tokenizer:
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(families.training_text(), trainers.WordLevelTrainer(vocab_size=800,
                                                                                special_tokens=["<unk>"]))
    return tok


def _byte_fallback_unigram(spec: dict) -> None:
    spec["model"]["byte_fallback"] = True
    spec["model"]["vocab"] += [[f"<0x{b:02X}>", -30.0] for b in range(256)]


@pytest.mark.parametrize("name", [*MODELS, "BPE-ignore-merges", "Unigram-byte-fallback"])
def test_model_options(name, request):
    if name in MODELS:
        spec = json.loads(MODELS[name]().to_str())
    elif name == "BPE-ignore-merges":
        spec = json.loads(families.gpt2())
        spec["model"]["ignore_merges"] = True
    else:
        spec = json.loads(families.t5())
        _byte_fallback_unigram(spec)
    text = json.dumps(spec)
    ours, ref = Pipeline(loads(text)), Tokenizer.from_str(text)
    bad = [t for t in CORPUS if ours.encode(t) != ref.encode(t).ids]
    assert not bad, f"{name}: {len(bad)} differ, e.g. {bad[:2]}"
    ids = [ref.encode(t).ids for t in CORPUS[:300]]
    for skip in (False, True):
        assert all(ours.decode(i, skip) == ref.decode(i, skip_special_tokens=skip) for i in ids), skip


def test_added_token_flags():
    """lstrip / rstrip / single_word / normalized added tokens under a lowercasing normalizer."""
    tok = Tokenizer.from_str(_wordpiece_tokenizer().to_str())
    from tokenizers import AddedToken

    tok.add_tokens([AddedToken("Hello", normalized=True), AddedToken("<<L>>", lstrip=True, normalized=False),
                    AddedToken("<<R>>", rstrip=True, normalized=False),
                    AddedToken("<<B>>", lstrip=True, rstrip=True, normalized=False),
                    AddedToken("word", single_word=True, normalized=True), AddedToken("ab", single_word=True),
                    AddedToken("x y", normalized=False)])
    tok.add_special_tokens([AddedToken("<<S>>", special=True, rstrip=True)])
    ours = Pipeline(loads(tok.to_str()))
    rng = random.Random(2)
    parts = ["HELLO", "hello", "Hello", " <<L>> ", "  <<R>>  ", "\t<<B>>\n", "word", "words", "sword", "_word",
             " word ", "ab", "abc", "éab", "x y", "x  y", "<<S>>", " <<S>> ", "text", "\u00a0", "١ab"]
    texts = ["".join(rng.choice(parts) for _ in range(rng.randint(1, 6))) for _ in range(1500)]
    for t in texts:
        want = tok.encode(t).ids
        assert ours.encode(t) == want, t
        assert ours.decode(want) == tok.decode(want, skip_special_tokens=False), t
        assert ours.decode(want, True) == tok.decode(want, skip_special_tokens=True), t


@pytest.mark.parametrize("spec, component", [
    ({"pre_tokenizer": {"type": "Nonsense"}}, "pre_tokenizer 'Nonsense'"),
    ({"normalizer": {"type": "Replace", "pattern": {"Regex": r"\p{Han}"}, "content": ""}}, r"\p{Han}"),
    ({"decoder": {"type": "Nonsense"}}, "decoder 'Nonsense'"),
    ({"post_processor": {"type": "Nonsense"}}, "post_processor 'Nonsense'"),
    ({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "dropout": 0.1}}, "dropout"),
])
def test_unsupported_is_refused_at_load(spec, component):
    full = {"model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}, **spec}
    with pytest.raises(Unsupported, match=component.replace("\\", "\\\\").replace("{", "\\{").replace("}", "\\}")):
        check(json.dumps(full))
    with pytest.raises(WebinferError, match="is not supported by webinfer's tokenizer"):
        Ours.from_json(json.dumps(full))


def test_build_refuses_unsupported_tokenizer(tmp_path):
    """`webinfer build` packs tokenizer.json through graph.llm.tokenizer_assets: refused there in one line."""
    from webinfer.graph.llm import tokenizer_assets

    (tmp_path / "model.onnx").write_bytes(b"")
    spec = json.loads(families.gpt2())
    spec["pre_tokenizer"] = {"type": "Nonsense"}
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec))
    with pytest.raises(WebinferError) as info:
        tokenizer_assets(str(tmp_path / "model.onnx"))
    assert "pre_tokenizer 'Nonsense' is not supported" in str(info.value) and "\n" not in str(info.value)
    (tmp_path / "tokenizer.json").write_text(families.gpt2())
    assert "tokenizer.json" in tokenizer_assets(str(tmp_path / "model.onnx"))


@pytest.mark.parametrize("name", ["NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents", "Bert", "BertAccents",
                                  "Precompiled", "Nmt"])
def test_normalizer_on_every_code_point(name):
    """Each code point this Python knows (its Unicode tables may be newer than `tokenizers`': the differences are
    in generated tables, scripts/gen_*_compat.py), after a letter and before a bar."""
    import unicodedata

    ref = NORMALIZERS[name]
    ours = our_normalizers.build(serialized(normalizer=ref)["normalizer"])
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000 and unicodedata.category(chr(c)) != "Cn"]
    for start in range(0, len(chars), 20000):
        text = "".join(f"a{c}|" for c in chars[start:start + 20000])
        got, want = ours(text), ref.normalize_str(text)
        if got != want:
            bad = [c for c in chars[start:start + 20000] if ours(f"a{c}|") != ref.normalize_str(f"a{c}|")]
            assert not bad, f"{name}: {len(bad)} code points differ, e.g. {[hex(ord(c)) for c in bad[:8]]}"


@pytest.mark.parametrize("name", ["Whitespace", "Punctuation", "DigitsIndividual", "SplitO200k", "SplitClasses",
                                  "UnicodeScripts"])
def test_pre_tokenizer_on_every_code_point(name):
    import unicodedata

    ref = PRE_TOKENIZERS[name]
    ours = our_pre.build(serialized(pre_tokenizer=ref)["pre_tokenizer"])
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000 and unicodedata.category(chr(c)) != "Cn"]
    bad = []
    for start in range(0, len(chars), 5000):
        part = chars[start:start + 5000]
        text = "".join(f"a{c}b " for c in part)
        if [p for p, _ in ours([(text, True)])] != [p for p, _ in ref.pre_tokenize_str(text)]:
            bad += [c for c in part if [p for p, _ in ours([(f"a{c}b ", True)])]
                    != [p for p, _ in ref.pre_tokenize_str(f"a{c}b ")]]
    assert not bad, f"{name}: {len(bad)} code points differ, e.g. {[hex(ord(c)) for c in bad[:8]]}"
