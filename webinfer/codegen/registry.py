"""The op table: ONNX op type -> lowering function. Each kernel family module registers its ops here.

To find where an op is lowered: ``grep -rn '"OpName"' webinfer/codegen/kernels/``.
"""

from __future__ import annotations

from collections.abc import Callable

LOWERINGS: dict[str, Callable] = {}


WEBINFER_DOMAIN = "webinfer"


def lowering(*op_types: str, domain: str = ""):
    """Register ``fn(ctx)`` as the lowering of the given op types.

    ONNX ops are keyed by their name; ops of webinfer's own domain (fused ops written by graph passes)
    by ``"webinfer:Name"``.
    """

    def register(fn):
        for op in op_types:
            key = op_key(domain, op)
            if key in LOWERINGS:
                raise RuntimeError(f"op {key} registered twice")
            LOWERINGS[key] = fn
        return fn

    return register


def op_key(domain: str, op_type: str) -> str:
    return op_type if domain in ("", "ai.onnx") else f"{domain}:{op_type}"


def load_all() -> None:
    """Import every kernel family so that its ops register."""
    from .kernels import ALL  # noqa: F401
