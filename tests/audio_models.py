"""Audio test helpers: transformers' Whisper features as the reference, and a tiny Whisper-style encoder export
(tests/graph/test_audio_prologue.py, tests/browser/test_audio_browser.py)."""

from __future__ import annotations

import json

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from scipy.signal import resample_poly

OPSET = [helper.make_opsetid("", 17)]


def whisper_reference(pcm: np.ndarray, rate: int, mels: int) -> np.ndarray:
    """transformers' Whisper features (numpy path) of ``pcm`` brought to 16 kHz by resample_poly in float64."""
    import transformers.models.whisper.feature_extraction_whisper as fw

    x = resample_poly(pcm.astype(np.float64), 16000, rate).astype(np.float32) if rate != 16000 else pcm
    torch_available, fw.is_torch_available = fw.is_torch_available, lambda: False
    try:
        return fw.WhisperFeatureExtractor(feature_size=mels)(x, sampling_rate=16000, return_tensors="np").input_features
    finally:
        fw.is_torch_available = torch_available


def tiny_encoder_export(folder) -> object:
    """A Conv1d + Gemm encoder over 80 x 3000 features, written as ``folder/encoder_model.onnx`` beside Whisper's
    preprocessor_config.json (as an optimum export has it); returns the ModelProto."""
    r = np.random.default_rng(7)
    w = numpy_helper.from_array(r.normal(0, 0.1, (8, 80, 3)).astype(np.float32), "w")
    fc = numpy_helper.from_array(r.normal(0, 0.1, (8, 5)).astype(np.float32), "fc")
    nodes = [helper.make_node("Conv", ["input_features", "w"], ["c"], strides=[2], pads=[1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("ReduceMean", ["r"], ["m"], axes=[2], keepdims=0),
             helper.make_node("Gemm", ["m", "fc"], ["logits"])]
    g = helper.make_graph(nodes, "enc", [helper.make_tensor_value_info("input_features", TensorProto.FLOAT,
                                                                       [1, 80, 3000])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 5])], [w, fc])
    model = helper.make_model(g, opset_imports=OPSET)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "encoder_model.onnx").write_bytes(model.SerializeToString())
    (folder / "preprocessor_config.json").write_text(json.dumps({
        "feature_extractor_type": "WhisperFeatureExtractor", "feature_size": 80, "sampling_rate": 16000,
        "hop_length": 160, "n_fft": 400, "chunk_length": 30, "n_samples": 480000, "nb_max_frames": 3000,
        "padding_side": "right", "padding_value": 0.0, "processor_class": "WhisperProcessor",
        "return_attention_mask": False}))
    return model
