"""Rewrites for text generation, asked for by the build when a model has a past/present KV cache.

``generation_rewrites(model, max_seq)`` returns the passes graph/optimize.py runs between the clean-up and
the fusions: the in-place KV cache with its attention (kv_cache.py; gqa.py for onnxruntime's
GroupQueryAttention), each layer's q/k/v projections as one matmul (pack_qkv.py), the logits of the last
position (or of the last k + 1 when a draft is verified, verify.py) and on-GPU sampling (head.py). ``tokenizer_assets(model_path)`` names the tokenizer files that travel with the
artifact.
"""

from __future__ import annotations

import os
from functools import partial

import onnx_ir as ir

from ...errors import WebinferError
from . import chat_format, gqa, head, kv_cache, logit_extras, pack_qkv, verify

DEFAULT_MAX_SEQ = 1024
# contrib ops these rewrites take over (graph/contrib leaves them for a generation build)
CONTRIB_KEPT: frozenset[str] = frozenset({"com.microsoft:GroupQueryAttention"})
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def generation_rewrites(model: ir.Model, max_seq: int | None) -> dict | None:
    """The rewrites for a decoder with a KV cache, or None when the model has none."""
    grouped = gqa.is_gqa_model(model)  # onnxruntime-genai's GroupQueryAttention decoders
    if not grouped and not kv_cache.is_kv_model(model):
        return None
    max_seq = DEFAULT_MAX_SEQ if max_seq is None else int(max_seq)
    if max_seq < 1:
        raise ValueError("--max-seq must be at least 1")
    return {
        "kv_cache": partial(gqa.run if grouped else kv_cache.run, max_seq=max_seq),
        "pack_qkv": pack_qkv.run,
        "last_token_logits": verify.last_rows_logits,  # the last verify_rows positions (1 unless verifying)
        "sample_token": partial(head.sample_token, max_seq=max_seq),
        "verify_draft": verify.verify_draft,
        "logit_extras": logit_extras.run,
    }


def batch_dim(model: ir.Model) -> str | None:
    """The symbolic batch dim of the past inputs (generation runs one sequence at a time)."""
    for v in model.graph.inputs:
        if v.name and v.name.startswith("past_key_values") and v.shape is not None and len(v.shape) == 4:
            d = v.shape[0]
            return None if isinstance(d, int) else str(d)
    return None


def tokenizer_assets(model_path) -> dict[str, bytes]:
    """tokenizer.json / tokenizer_config.json found beside the model file, to store in the artifact."""
    if not isinstance(model_path, (str, os.PathLike)):
        return {}
    folder = os.path.dirname(os.path.abspath(model_path))
    found = {}
    for name in TOKENIZER_FILES:
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                found[name] = f.read()
    if "tokenizer.json" in found:  # refuse here what the runtime's tokenizer could not reproduce exactly
        from ...llm.tokenizers import Unsupported, check

        try:
            check(found["tokenizer.json"])
        except Unsupported as e:
            raise WebinferError(f"{os.path.join(folder, 'tokenizer.json')}: {e.describe()} (move the file away "
                                "to build without a tokenizer)") from None
    if "tokenizer_config.json" in found:  # the browser renders the chat template from a precomputed format
        found["tokenizer_config.json"] = chat_format.with_chat_format(found["tokenizer_config.json"])
    return found
