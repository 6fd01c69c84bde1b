"""onnxruntime's DynamicQuantizeLSTM -> an LSTM (webinfer's domain) over int8 weights dequantized on the GPU.

onnxruntime's dynamic quantizer (``quantize_dynamic``) writes it for LSTMs: W [dirs, input, 4h] and R
[dirs, hidden, 4h] as int8 with a scale and zero point per direction or per (direction, gate column). The
weights become ONNX's [dirs, 4h, k] rows packed as an ``nbits8`` table (graph/contrib/quant.py's format: one
byte per weight, int8 codes shifted to uint8 with their zero point, a (scale, zero point) pair per row block),
which webinfer.GatherQ dequantizes on the GPU at each run: the weights stay one byte each in the artifact and
in GPU memory, and only the f32 rows the LSTM kernel reads are a temporary.

onnxruntime also quantizes the activations on the fly (uint8, range from the data, zero included): X once over
the whole sequence, H(t-1) per step over the direction's batch rows; the products are integer, scaled back.
The expansion writes the same: X through DynamicQuantizeLinear/DequantizeLinear (equal to onnxruntime's
``GetQuantizationParameter``), and the LSTM with ``quantize_hidden=1``, whose step kernel rounds H(t-1) the
same way before its recurrent dot products (codegen/kernels/recurrent.py). onnxruntime splits the batch across
threads when it has several (batch >= 2 and hidden <= 256), each chunk then with its own H range: equal to
this only with one thread, or batch 1. ``sequence_lens`` (whose X range and reverse-step grouping onnxruntime
takes from the lengths) is refused.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ...opschema import WEBINFER_DOMAIN
from ..passes._util import const
from .builder import Builder, expansion
from .quant import quant_params


def _block(k: int) -> int:
    """The block of the nbits8 rows: one parameter pair per block, rows padded to whole blocks."""
    return next((b for b in (256, 128, 64, 32) if k % b == 0), 32)


def _dequantized(b: Builder, q: ir.Value, scale: ir.Value, zp: ir.Value | None, what: str) -> ir.Value:
    """[dirs, k, 4h] int8 -> [dirs, 4h, k] float, through webinfer.GatherQ over every row of the packed table."""
    qa, s = const(q), const(scale)
    z = const(zp) if zp is not None else np.zeros(np.shape(s), np.int8)
    if qa is None or s is None or z is None:
        raise b.unsupported(f"{what}, its scale and its zero point must be constants")
    if qa.ndim != 3 or qa.dtype not in (np.int8, np.uint8):
        raise b.unsupported(f"{what} must be [directions, k, 4*hidden] int8 or uint8")
    dirs, k, n = qa.shape
    s, z = np.asarray(s, np.float32).reshape(-1), np.asarray(z).reshape(-1)
    if s.size not in (1, dirs, dirs * n) or z.size != s.size:
        raise b.unsupported(f"{what}'s scale must be per tensor, per direction or per gate column")
    rows = dirs * n
    shift = 128 if qa.dtype == np.int8 else 0  # signed codes move to 0..255, the zero point with them
    codes = (qa.transpose(0, 2, 1).reshape(rows, k).astype(np.int16) + shift).astype(np.uint8)
    block = _block(k)
    blocks = -(-k // block)
    codes = np.pad(codes, ((0, 0), (0, blocks * block - k)))
    row_scale = np.repeat(s, rows // s.size)
    row_zp = np.repeat(z.astype(np.float32) + shift, rows // z.size)
    params = np.repeat(quant_params(row_scale, row_zp)[:, None, :], blocks, axis=1)
    words = b.const(np.ascontiguousarray(codes).view("<u4"), f"{what}_words")
    table = [words, b.const(params, f"{what}quant_params"), b.const(np.arange(rows, dtype=np.int64), f"{what}_rows")]
    f = b.op("GatherQ", table, {"format": "nbits8", "k": k, "block": block}, domain=WEBINFER_DOMAIN,
             dtype=ir.DataType.FLOAT, shape=[rows, k])
    return b.op("Reshape", [f, b.const(np.array([dirs, n, k], np.int64), f"{what}_shape")], shape=[dirs, n, k])


@expansion("DynamicQuantizeLSTM")
def dynamic_quantize_lstm(node: ir.Node, b: Builder) -> list:
    ins = [b.input(i) for i in range(12)]
    x, wq, rq, bias, lens, h0, c0, peep, w_scale, w_zp, r_scale, r_zp = ins
    if lens is not None:
        raise b.unsupported("sequence_lens is not supported (onnxruntime quantizes X and H by the lengths)")
    if int(b.attr("input_forget", 0)):
        raise b.unsupported("input_forget=1 is not supported")
    if x is None or wq is None or rq is None or w_scale is None or r_scale is None:
        raise b.unsupported("X, W, R and their scales are required")
    xq, xs, xzp = b.op("DynamicQuantizeLinear", [x], outputs=3)
    xq.dtype, xs.dtype, xzp.dtype = ir.DataType.UINT8, ir.DataType.FLOAT, ir.DataType.UINT8
    xq.shape, xs.shape, xzp.shape = x.shape, ir.Shape([]), ir.Shape([])
    xf = b.op("DequantizeLinear", [xq, xs, xzp], shape=x.shape, dtype=ir.DataType.FLOAT)
    w = _dequantized(b, wq, w_scale, w_zp, "W")
    r = _dequantized(b, rq, r_scale, r_zp, "R")
    attrs = {k: a for k, a in node.attributes.items()}
    attrs["quantize_hidden"] = ir.AttrInt64("quantize_hidden", 1)
    outs = b.op("LSTM", [xf, w, r, bias, None, h0, c0, peep], attrs, domain=WEBINFER_DOMAIN, outputs=3,
                dtype=ir.DataType.FLOAT)
    for o in outs:
        o.dtype = ir.DataType.FLOAT
    return [outs[i] if b.wanted(i) else None for i in range(3)]
