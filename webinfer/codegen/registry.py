"""The op table: ONNX op type -> lowering function. Each kernel family module registers its ops here.

To find where an op is lowered: ``grep -rn '"OpName"' webinfer/codegen/kernels/``.
"""

from __future__ import annotations

from collections.abc import Callable

LOWERINGS: dict[str, Callable] = {}


def lowering(*op_types: str):
    """Register ``fn(ctx)`` as the lowering of the given op types (default ONNX domain)."""

    def register(fn):
        for op in op_types:
            if op in LOWERINGS:
                raise RuntimeError(f"op {op} registered twice")
            LOWERINGS[op] = fn
        return fn

    return register


def load_all() -> None:
    """Import every kernel family so that its ops register."""
    from .kernels import ALL  # noqa: F401
