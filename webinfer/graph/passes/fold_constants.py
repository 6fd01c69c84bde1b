"""Constant folding before the other passes: onnxscript's optimizer (``fold_constants``), so that, for
instance, a Conv weight produced by a Constant node or DequantizeLinear of constants counts as constant
for conv_bn. The lowering folds all-constant nodes again; this only makes them visible earlier.
Size limits are onnxscript's defaults, so huge constants are not materialised twice. Its per-node
ONNX shape inference is on: it fills value shapes that the pair rules and MatMul->Gemm rely on
(about 50 ms for a 115-node model)."""

from __future__ import annotations

import onnx_ir as ir
from onnxscript.optimizer import fold_constants

from ._util import count_nodes


def run(model: ir.Model) -> int:
    before = count_nodes(model)
    fold_constants(model, onnx_shape_inference=True)
    return before - count_nodes(model)
