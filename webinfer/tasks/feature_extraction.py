"""Feature extraction: texts -> sentence embeddings, pooled and normalised on the GPU (llm/embeddings.py).

Needs an artifact built with ``--sentence-embedding`` (mean/CLS/max pooling and L2 normalisation as the
model's sentence-transformers config says, recorded as a ``sentence_embedding`` output).
"""

from __future__ import annotations

from ..llm.embeddings import Embedder, load_embedder


class FeatureExtraction(Embedder):
    """``pipeline("feature-extraction", "minilm.wi")(["a text", ...])`` -> unit-length vectors (lists of
    floats); ``call_async`` in Pyodide."""

    def __init__(self, artifact: str, device=None, kernel_class: str | None = None):
        loaded = load_embedder(artifact, device=device, kernel_class=kernel_class)
        super().__init__(loaded._run, loaded.inputs, loaded.tokenizer)
        self.session = loaded.session
