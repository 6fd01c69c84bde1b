"""The manifest's ``seq2seq`` block (graph/seq2seq.py writes it, llm/seq2seq.py reads it): how the decoder-step
artifact and the encoder artifact nested in it are joined. Standard library only.

  encoder         the nested artifact's folder (a plain name inside this one)
  cross           [[encoder output, this artifact's state], ...]: copied on the GPU once per input
  source_dim      the states' source-length dim (bound per input; the states are sized for its bound)
  encoder_inputs  the encoder's inputs, in order
  first_tokens    the decoder's first ids (start token, then forced language/task tokens)
  eos             ids that end the output
  model_type      config.json's model_type (informative)
"""

from __future__ import annotations

import re

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def read_seq2seq(r, v) -> dict:
    """Type-check the block with the manifest reader ``r`` (format/fields.py); returns it."""
    r.obj(v, "seq2seq", ("encoder", "cross", "source_dim", "encoder_inputs", "first_tokens", "eos", "model_type"))
    if not _NAME.match(r.str(v["encoder"], "seq2seq.encoder", max_len=64)):
        r.fail("seq2seq.encoder", "expected a plain folder name")
    for i, pair in enumerate(r.list(v["cross"], "seq2seq.cross")):
        for j, name in enumerate(r.list(pair, f"seq2seq.cross[{i}]", 2)):
            r.str(name, f"seq2seq.cross[{i}][{j}]", max_len=200)
    r.str(v["source_dim"], "seq2seq.source_dim", max_len=200)
    r.strs(v["encoder_inputs"], "seq2seq.encoder_inputs")
    for key in ("first_tokens", "eos"):
        for i, t in enumerate(r.list(v[key], f"seq2seq.{key}")):
            r.int(t, f"seq2seq.{key}[{i}]", 0, 2**31 - 1)
    if not v["first_tokens"]:
        r.fail("seq2seq.first_tokens", "needs at least the decoder's start token")
    r.str(v["model_type"], "seq2seq.model_type", max_len=40)
    return v
