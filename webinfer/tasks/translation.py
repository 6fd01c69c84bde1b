"""Translation (any text-to-text encoder-decoder: Marian, T5-style): text -> text, generated on the GPU."""

from __future__ import annotations

from ..llm.seq2seq import Seq2SeqGenerator


class Translation:
    """``pipeline("translation", art)(text)`` -> {"translation_text", "token_ids"}."""

    def __init__(self, artifact: str, device=None, kernel_class: str | None = None):
        self.generator = Seq2SeqGenerator.load(artifact, device=device, kernel_class=kernel_class)

    def __call__(self, text: str, **options) -> dict:
        """``options`` as ``Seq2SeqGenerator.agenerate`` (max_new_tokens, temperature, top_k, ...)."""
        tokens = list(self.generator.generate(self.generator.text_feeds(text), **options))
        return {"translation_text": self.generator.stats["text"], "token_ids": [t.id for t in tokens]}

    async def call_async(self, text: str, **options) -> dict:
        ids = [t.id async for t in self.generator.agenerate(self.generator.text_feeds(text), **options)]
        return {"translation_text": self.generator.stats["text"], "token_ids": ids}
