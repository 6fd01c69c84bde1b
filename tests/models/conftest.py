"""Fixtures for real-model tests: the ONNX files come from installed packages or a one-time export."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def minilm_dir():
    """Folder with all-MiniLM-L6-v2's model.onnx + tokenizer.json (exported once, then cached)."""
    from webinfer.models import export_minilm

    return export_minilm()
