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


def assert_close_to_peak(got, ref, what: str, rel: float = 1e-4) -> float:
    """The models' tolerance rule: max abs error <= rel * max abs of the reference output."""
    import numpy as np

    assert got.shape == ref.shape, f"{what}: shape {got.shape} != onnxruntime {ref.shape}"
    assert got.dtype == ref.dtype, f"{what}: dtype {got.dtype} != onnxruntime {ref.dtype}"
    err = float(np.abs(got.astype(np.float64) - ref).max())
    peak = float(np.abs(ref).max())
    print(f"{what}: max abs err {err:.3g}, max abs output {peak:.3g}, ratio {err / peak:.3g}")
    assert err <= rel * peak, f"{what}: max abs err {err:.3g} > {rel:g} x max abs output {peak:.3g}"
    return err
