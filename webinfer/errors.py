"""One exception type for everything a user can get wrong, so the CLI prints one line, not a traceback."""


class WebinferError(Exception):
    """A clear, one-line problem with the user's input (model, artifact, feeds, options)."""


class UnsupportedOpError(WebinferError):
    """The model uses an operator (or a form of it) that webinfer cannot lower to WGSL."""
