"""Tiny random Llamas exported like SmolLM2 (demos/recipes/smollm2.py) with SmolLM2's tokenizer files beside
them, cached under ~/.cache/webinfer/models by their config: the KV-cache rewrite, the generator and the chat
pages are tested on the exporter's real spelling in seconds. Shared by tests/llm and tests/browser."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

TINY = {"vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 4096,
        "tie_word_embeddings": True, "initializer_range": 0.3, "rms_norm_eps": 1e-5}
# SmolLM2's whole vocabulary, so real text and chat templates (ids up to 49151) can be fed to it.
TINY_CHAT = {**TINY, "vocab_size": 49152}


def tokenizer_dir() -> Path:
    from demos.recipes import smollm2

    out = smollm2.cache_dir()
    smollm2.export_tokenizer(out)
    return out


def tiny_llama(config: dict) -> Path:
    """A folder with model.onnx (random weights, seeded) and SmolLM2's tokenizer files."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from demos.recipes import smollm2

    key = hashlib.sha256(repr(sorted(config.items())).encode()).hexdigest()[:10]
    out = smollm2.cache_dir().parent / f"tiny-llama-test-{key}"
    tok = tokenizer_dir()
    out.mkdir(parents=True, exist_ok=True)
    for name in smollm2.TOKENIZER_FILES:
        shutil.copyfile(tok / name, out / name)
    torch.manual_seed(0)
    cfg = LlamaConfig(**config)
    cfg._attn_implementation = "sdpa"
    smollm2.export_model(out, model=LlamaForCausalLM(cfg).eval())
    return out
