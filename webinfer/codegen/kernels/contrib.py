"""ONNX opset 23's Attention and RotaryEmbedding under webinfer's domain: graph/contrib writes them when it
expands onnxruntime's attention operators, whatever the model's opset (the ONNX ones need opset 23)."""

from __future__ import annotations

from ..registry import WEBINFER_DOMAIN, lowering
from . import attention

lowering("Attention", domain=WEBINFER_DOMAIN)(attention.lower_attention)
lowering("RotaryEmbedding", domain=WEBINFER_DOMAIN)(attention.lower_rotary)
