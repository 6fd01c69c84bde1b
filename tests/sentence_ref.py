"""Independent reference for sentence embeddings: onnxruntime's hidden states pooled in numpy as
sentence-transformers' Pooling and Normalize modules do."""

from __future__ import annotations

import numpy as np


def pool(hidden: np.ndarray, mask: np.ndarray, mode: str = "mean", normalize: bool = True) -> np.ndarray:
    """[batch, seq, width] states and a [batch, seq] mask -> [batch, width]."""
    h, m = hidden.astype(np.float64), mask.astype(np.float64)[..., None]
    if mode == "cls":
        v = h[:, 0]
    elif mode == "max":
        v = np.where(m > 0, h, -1e9).max(1)
    else:
        count = np.maximum(m.sum(1), 1e-9)
        v = (h * m).sum(1) / (count if mode == "mean" else np.sqrt(count))
    if normalize:
        v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    return v


def ort_sentence_embeddings(folder, texts) -> np.ndarray:
    """The model in ``folder`` (model.onnx, tokenizer.json), one text at a time, mean-pooled and normalised."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    sess = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
    out = []
    for text in texts:
        e = tok.encode(text)
        ids, mask = np.array([e.ids]), np.array([e.attention_mask])
        hidden = sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
        out.append(pool(hidden, mask)[0])
    return np.array(out)
