"""GELU-family contrib ops -> an optional bias Add and webinfer's Gelu / Swish (elementwise: they fuse into
the matmul before them as an epilogue)."""

from __future__ import annotations

import onnx_ir as ir

from ...opschema import WEBINFER_DOMAIN
from .builder import Builder, expansion


def _biased(b: Builder) -> ir.Value:
    x, bias = b.input(0), b.input(1)
    return b.op("Add", [x, bias]) if bias is not None else x


@expansion("FastGelu")
def fast_gelu(node: ir.Node, b: Builder) -> list:
    """0.5 x (1 + tanh(0.797885 x + 0.035677 x^3)), x = X + bias: GELU's tanh approximation."""
    x = _biased(b)
    return [b.op("Gelu", [x], {"approximate": "tanh"}, domain=WEBINFER_DOMAIN, shape=x.shape)]


@expansion("BiasGelu")
def bias_gelu(node: ir.Node, b: Builder) -> list:
    x = _biased(b)
    return [b.op("Gelu", [x], domain=WEBINFER_DOMAIN, shape=x.shape)]


@expansion("QuickGelu")
def quick_gelu(node: ir.Node, b: Builder) -> list:
    """x * Sigmoid(alpha x) is Swish with the same alpha."""
    x = b.input(0)
    return [b.op("Swish", [x], {"alpha": float(b.attr("alpha", 1.702))}, domain=WEBINFER_DOMAIN, shape=x.shape)]
