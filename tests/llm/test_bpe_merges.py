"""BPE merges are worked out pair by pair on first use (llm/tokenizers/bpe.py MergeTable): encoding equals
`tokenizers`, and a merge whose tokens are missing from the vocabulary is still refused where `webinfer build`
loads the file (tokenizers.check); `tokenizers` itself cannot load such a file either."""

from __future__ import annotations

import json

import pytest

tokenizers = pytest.importorskip("tokenizers")


def _spec() -> dict:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    text = ["the cat sat on the mat", "a kitten rests on the rug", "the theme of these theories"] * 20
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=300, show_progress=False,
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return json.loads(tok.to_str())


@pytest.mark.parametrize("merges_as", ["text", "pairs"])
def test_lazy_merges_encode_as_tokenizers(merges_as):
    from tokenizers import Tokenizer

    from webinfer.llm.tokenizer import Tokenizer as Ours

    spec = _spec()
    if merges_as == "text":
        spec["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in spec["model"]["merges"]]
    else:
        spec["model"]["merges"] = [m.split(" ", 1) if isinstance(m, str) else m for m in spec["model"]["merges"]]
    ref, ours = Tokenizer.from_str(json.dumps(spec)), Ours.from_json(json.dumps(spec))
    for text in ("the cat sat on the mat", "theories of the theme, rethought", "zebra quartz 123 the"):
        assert ours.encode(text) == ref.encode(text).ids, text


def test_a_merge_missing_from_the_vocabulary_is_refused_at_check():
    from tokenizers import Tokenizer

    from webinfer.llm.tokenizers import Unsupported, check

    spec = _spec()
    check(json.dumps(spec))  # the file as trained loads
    merge = spec["model"]["merges"][-1]
    a, b = merge.split(" ", 1) if isinstance(merge, str) else merge
    vocab = spec["model"]["vocab"]
    vocab["<renamed>"] = vocab.pop(a + b)  # the last merge's result (no other merge builds on it), ids kept whole
    with pytest.raises(BaseException, match="range|vocab"):  # (tokenizers 0.22 refuses it with a Rust panic)
        Tokenizer.from_str(json.dumps(spec))
    with pytest.raises(Unsupported, match="missing from the vocabulary"):
        check(json.dumps(spec))
