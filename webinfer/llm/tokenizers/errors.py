"""The one error the tokenizer package raises for a tokenizer.json it cannot reproduce exactly."""

from __future__ import annotations


class Unsupported(ValueError):
    """A component (or option of one) this package does not implement: refused when the file is loaded (and
    so at build time), never half-run."""
