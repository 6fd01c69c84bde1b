"""all-MiniLM-L6-v2 (BERT, exported by webinfer.models.export_minilm) vs onnxruntime CPU on the same ONNX.

One webinfer build with symbolic batch and sequence dims runs two sequence lengths."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from model_compare import assert_close_to_peak, assert_data_on_gpu

from webinfer.build import build
from webinfer.runtime.inference import InferenceSession

pytestmark = pytest.mark.slow
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "WebGPU lets a web page run compute shaders on the graphics card.",
    "A sentence embedding maps text to a vector of 384 numbers.",
    "Hello!",
]


def tokenize(tokenizer_json: str, length: int) -> dict[str, np.ndarray]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(tokenizer_json)
    tok.enable_truncation(max_length=length)
    tok.enable_padding(length=length, pad_id=0, pad_token="[PAD]")
    enc = tok.encode_batch(SENTENCES)
    return {
        "input_ids": np.array([e.ids for e in enc], np.int64),
        "attention_mask": np.array([e.attention_mask for e in enc], np.int64),
        "token_type_ids": np.array([e.type_ids for e in enc], np.int64),
    }


@pytest.fixture(scope="module", params=["software", "gpu"])
def sessions(request, minilm_dir, tmp_path_factory):
    path = str(minilm_dir / "model.onnx")
    out = tmp_path_factory.mktemp("minilm")
    manifest = build(path, str(out / "artifact"), save_optimized=str(out / "lowered.onnx"),
                     target=request.param)
    assert_data_on_gpu(out / "lowered.onnx", manifest)
    assert set(manifest["dims"]) >= {"sequence"}, f"sequence dim not symbolic: {manifest['dims']}"
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return InferenceSession(str(out / "artifact")), ref


@pytest.mark.parametrize("length", [128, 23])
def test_minilm_matches_onnxruntime(sessions, minilm_dir, length):
    ours, ref = sessions
    feeds = tokenize(str(minilm_dir / "tokenizer.json"), length)
    assert feeds["attention_mask"].sum(1).min() < length  # some padding is exercised
    want = ref.run(["last_hidden_state"], feeds)[0]
    got = ours.run(["last_hidden_state"], feeds)[0]
    assert_close_to_peak(got, want, f"MiniLM last_hidden_state (batch {len(SENTENCES)}, seq {length})")
