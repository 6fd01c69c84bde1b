"""The errors the tokenizer package raises for a tokenizer.json it cannot reproduce exactly."""

from __future__ import annotations


class Unsupported(ValueError):
    """A component (or option of one) this package does not implement, named in the message: refused when
    the file is loaded (and so at build time), never half-run."""

    def describe(self) -> str:
        return f"{self} is not supported by webinfer's tokenizer"


class Malformed(Unsupported):
    """A file that is not a tokenizer.json `tokenizers` could load either."""

    def describe(self) -> str:
        return str(self)
