"""The op table: ONNX op type -> lowering function. Each kernel family module registers its ops here.

To find where an op is lowered: ``grep -rn '"OpName"' webinfer/codegen/kernels/``. What an op *is*
(host inputs, optional outputs, foldable, elementwise, epilogue) is declared in ``webinfer/opschema.py``.
"""

from __future__ import annotations

from collections.abc import Callable

from ..opschema import WEBINFER_DOMAIN, op_key  # noqa: F401  (re-exported: kernels import them from here)

LOWERINGS: dict[str, Callable] = {}


def lowering(*op_types: str, domain: str = ""):
    """Register ``fn(ctx)`` as the lowering of the given op types.

    ONNX ops are keyed by their name; ops of other domains (webinfer's fused ops, onnxruntime's
    ``com.microsoft`` contrib ops) by ``"domain:Name"``.
    """

    def register(fn):
        for op in op_types:
            key = op_key(domain, op)
            if key in LOWERINGS:
                raise RuntimeError(f"op {key} registered twice")
            LOWERINGS[key] = fn
        return fn

    return register


def has_lowering(key: str) -> bool:
    """Whether the op keyed ``key`` (``op_key``) has a lowering of its own."""
    load_all()
    return key in LOWERINGS


def load_all() -> None:
    """Import every kernel family so that its ops register."""
    from .kernels import ALL  # noqa: F401
