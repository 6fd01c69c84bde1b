"""The CPU path's text side (webinfer/page_cpu.py), as the page's worker opens it: the artifact's tokenizer files
handed over as text (``CpuText.from_texts``). Ids are checked against Hugging Face `tokenizers`."""

from __future__ import annotations

import json

import pytest
from tokenizers import Tokenizer

from webinfer.errors import WebinferError
from webinfer.models import export_minilm
from webinfer.page_cpu import CpuText

TEXTS = ["The café opened at 9 o'clock — très tôt!", "A coffee shop opens early in the morning.", "naïve  spaces\tand\ttabs"]


def test_from_texts_encodes_as_tokenizers_does():
    text = (export_minilm() / "tokenizer.json").read_text(encoding="utf-8")
    reference = Tokenizer.from_str(text)
    reference.no_padding()
    reference.no_truncation()
    cpu = CpuText.from_texts(text)
    for s in TEXTS:
        assert cpu.encode(s) == reference.encode(s).ids, s


def test_options_are_checked_as_the_webgpu_path_checks_them():
    cpu = CpuText.from_texts((export_minilm() / "tokenizer.json").read_text(encoding="utf-8"))
    full = json.loads(cpu.options(json.dumps({"max_new_tokens": 3})))
    assert full["max_new_tokens"] == 3 and full["temperature"] == 0.0
    with pytest.raises(WebinferError, match="unknown chat option 'beam'"):
        cpu.options(json.dumps({"beam": 2}))
    with pytest.raises(WebinferError, match="top_p"):
        cpu.options(json.dumps({"top_p": 0.0}))
