"""Text generation: a prompt (or chat messages) -> text, with the artifact's tokenizer and GPU sampling."""

from __future__ import annotations

from ..llm.generate import Generator


class TextGeneration:
    """Needs an artifact built from a decoder with a KV cache (``webinfer build`` of an export folder)."""

    def __init__(self, artifact: str, device=None, kernel_class: str | None = None):
        self.generator = Generator.load(artifact, device=device, kernel_class=kernel_class)

    def __call__(self, prompt, **options) -> str:
        """``prompt``: a string, or a list of ``{"role", "content"}`` messages (rendered with the model's chat
        template); ``options`` as ``Generator.generate`` (max_new_tokens, temperature, top_k, top_p, seed...)."""
        if isinstance(prompt, list):
            return "".join(t.text for t in self.generator.chat(prompt, **options))
        return "".join(t.text for t in self.generator.generate(prompt, **options))
