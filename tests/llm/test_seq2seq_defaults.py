"""The README's ``webinfer translate marian.wi "Hello" --json`` with no --max-new-tokens: the default (64) is cut
to what the decoder's positions leave after its first tokens, as transformers' ``max_length`` counts the start
token, instead of failing on a decoder with 64 positions. Ids checked against optimum's loop on onnxruntime."""

from __future__ import annotations

import json

import seq2seq_fixtures as fx

import webinfer
from tests.llm.test_seq2seq import SENTENCES, _source, ort_greedy
from webinfer.cli import main as cli
from webinfer.tasks import pipeline


def test_default_max_new_tokens_fits_the_decoder(tmp_path, capsys):
    folder = fx.marian_tiny()
    art = tmp_path / "marian.wi"
    webinfer.build(str(folder), str(art), target="software")
    tr = pipeline("translation", str(art))
    room = tr.generator.max_seq - len(tr.generator.first_tokens)
    assert room < 64  # (the case: fewer positions than the default asks for)
    text = SENTENCES[0]
    assert cli(["translate", str(art), text, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    want = ort_greedy(folder, _source(folder, text), [2], {1}, room)
    assert out["token_ids"] == want and len(want) <= room
    assert tr(text)["token_ids"] == want  # (Python: the same default)
    assert cli(["translate", str(art), text, "--max-new-tokens", "64"]) == 2  # (asked for: still refused)
    assert "exceed the decoder's" in capsys.readouterr().err
