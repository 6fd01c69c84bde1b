"""Norm contrib ops -> an Add for the residual (which the epilogue pass can fold into the matmul before it)
and webinfer's RMSNormalization / LayerNormalization (ONNX semantics, one row kernel)."""

from __future__ import annotations

import onnx_ir as ir

from ...opschema import ONNX_DOMAIN, WEBINFER_DOMAIN
from .builder import Builder, expansion

SKIP_EPSILON = 1e-12  # onnxruntime's default for the Skip*/Embed* norms


def _no_stats(node: ir.Node, b: Builder, *indices: int) -> None:
    """Mean and inverse std outputs exist for training; nothing at inference reads them."""
    for i in indices:
        if b.wanted(i):
            raise b.unsupported(f"output {i} (saved statistics for training) is not produced")


def _rms(b: Builder, x: ir.Value, scale: ir.Value, epsilon: float, axis: int = -1) -> ir.Value:
    return b.op("RMSNormalization", [x, scale], {"axis": axis, "epsilon": float(epsilon)}, domain=WEBINFER_DOMAIN,
                shape=x.shape)


@expansion("SimplifiedLayerNormalization", domain=ONNX_DOMAIN)
@expansion("SimplifiedLayerNormalization")
def simplified_layer_norm(node: ir.Node, b: Builder) -> list:
    _no_stats(node, b, 1)
    return [_rms(b, b.input(0), b.input(1), b.attr("epsilon", 1e-5), b.attr("axis", -1))]


def _skip_sum(b: Builder, bias_index: int) -> ir.Value:
    s = b.op("Add", [b.input(0), b.input(1)])
    bias = b.input(bias_index)
    return b.op("Add", [s, bias]) if bias is not None else s


@expansion("SkipSimplifiedLayerNormalization")
def skip_simplified_layer_norm(node: ir.Node, b: Builder) -> list:
    """input, skip, gamma, bias? -> (RMSNorm(input + skip + bias), -, -, input + skip + bias)."""
    _no_stats(node, b, 1, 2)
    s = _skip_sum(b, 3)
    return [_rms(b, s, b.input(2), b.attr("epsilon", SKIP_EPSILON)), None, None, s]


def _layer_norm(b: Builder, x: ir.Value, gamma: ir.Value, beta: ir.Value | None, epsilon: float) -> ir.Value:
    return b.op("LayerNormalization", [x, gamma, beta], {"axis": -1, "epsilon": float(epsilon)},
                domain=WEBINFER_DOMAIN, shape=x.shape)


@expansion("SkipLayerNormalization")
def skip_layer_norm(node: ir.Node, b: Builder) -> list:
    """input, skip, gamma, beta?, bias? -> (LayerNorm(input + skip + bias), -, -, input + skip + bias)."""
    _no_stats(node, b, 1, 2)
    s = _skip_sum(b, 4)
    return [_layer_norm(b, s, b.input(2), b.input(3), b.attr("epsilon", SKIP_EPSILON)), None, None, s]


@expansion("EmbedLayerNormalization")
def embed_layer_norm(node: ir.Node, b: Builder) -> list:
    """BERT's embeddings: word + position (+ segment) lookups, summed, LayerNorm; mask_index = sum(mask)."""
    ids, segments, words, positions, segment_table, gamma, beta, mask, position_ids = (
        b.input(i) for i in range(9))
    e = b.op("Gather", [words, ids], {"axis": 0})
    if position_ids is not None:
        p = b.op("Gather", [positions, position_ids], {"axis": 0})
    else:  # positions 0 .. seq-1: the first rows of the table
        seq = b.op("Shape", [ids], {"start": 1, "end": 2}, dtype=ir.DataType.INT64, shape=[1])
        zero = b.const([0], "zero")
        rows = b.op("Slice", [positions, zero, seq, zero])
        p = b.op("Unsqueeze", [rows, b.const([0], "axis0")])
    e = b.op("Add", [e, p])
    if segments is not None and segment_table is not None:
        e = b.op("Add", [e, b.op("Gather", [segment_table, segments], {"axis": 0})])
    out = _layer_norm(b, e, gamma, beta, b.attr("epsilon", SKIP_EPSILON))
    mask_index = None
    if b.wanted(1):
        if mask is None:
            raise b.unsupported("mask_index is asked for without a mask input")
        total = b.op("ReduceSum", [mask, b.const([1], "axis1")], {"keepdims": 0}, shape=[ids.shape[0]] if
                     ids.shape is not None else None)
        mask_index = b.op("Cast", [total], {"to": ir.DataType.INT32}, dtype=ir.DataType.INT32)
    return [out, mask_index, e]
