"""Constant folding before the other passes: onnxscript's optimizer (``fold_constants``), so that, for
instance, a Conv weight produced by a Constant node or DequantizeLinear of constants counts as constant
for conv_bn. The lowering folds all-constant nodes again; this only makes them visible earlier.
Size limits are onnxscript's defaults, so huge constants are not materialised twice. Its per-node
ONNX shape inference is on: it fills value shapes that the pair rules and MatMul->Gemm rely on
(about 50 ms for a 115-node model). A weight stored narrow and widened by ``Cast`` (float16, int8) is left for
graph/quantize.py, which keeps it packed.

onnxscript rewrites CastLike into a Cast without CastLike's ``saturate`` and ``round_mode`` (onnxscript
0.5: float8 casts would then saturate when the model says not to), so CastLike nodes whose target type is
known become that Cast here first, with the attributes kept."""

from __future__ import annotations

import onnx_ir as ir
from onnxscript.optimizer import fold_constants

from ._util import const, count_nodes

_NARROW = (ir.DataType.FLOAT16, ir.DataType.INT8, ir.DataType.UINT8)


def run(model: ir.Model) -> int:
    before = count_nodes(model)
    castlike_to_cast(model.graph)
    # onnxscript 0.5 crashes on SplitToSequence whose split is a non-constant scalar ('NoneType' has no
    # 'ndim'): hide that shape while folding (it then leaves the node alone) and put it back after
    hidden = [(v, v.shape) for n in model.graph if n.op_type == "SplitToSequence" and len(n.inputs) > 1
              for v in n.inputs[1:2] if v is not None and v.const_value is None and v.shape is not None
              and len(v.shape) == 0]
    for v, _ in hidden:
        v.shape = None
    try:
        fold_constants(model, onnx_shape_inference=True, should_fold=keeps_packed_weight)
    finally:
        for v, shape in hidden:
            v.shape = shape
    return before - count_nodes(model)


def castlike_to_cast(graph: ir.Graph) -> None:
    """CastLike(x, like) -> Cast(x, to=like's type), keeping saturate/round_mode."""
    for node in list(graph):
        if node.op_type != "CastLike" or node.domain not in ("", "ai.onnx") or len(node.inputs) < 2:
            continue
        like = node.inputs[1]
        if like is None or like.dtype is None:
            continue
        attrs = [ir.AttrInt64("to", like.dtype.value)]
        attrs += [a for name, a in node.attributes.items() if name in ("saturate", "round_mode")]
        cast = ir.Node("", "Cast", [node.inputs[0]], attrs, num_outputs=1, name=node.name)
        graph.insert_before(node, cast)
        old = node.outputs[0]
        old.replace_all_uses_with(cast.outputs[0], replace_graph_outputs=True)
        graph.remove(node, safe=True)
        cast.outputs[0].name, cast.outputs[0].shape, cast.outputs[0].type = old.name, old.shape, old.type


def keeps_packed_weight(node: ir.Node) -> bool | None:
    """False for ``Cast(to=float)`` of a float16/int8/uint8 matrix constant: a weight the model stores narrow,
    which graph/quantize.py keeps so (the matmul reads it packed); folding would widen it to f32 first."""
    if node.op_type != "Cast" or node.domain not in ("", "ai.onnx") or not node.inputs:
        return None
    src = node.inputs[0]
    if src is None or src.dtype not in _NARROW or node.attributes.get("to") is None \
            or node.attributes["to"].as_int() != ir.DataType.FLOAT.value:
        return None
    value = const(src)
    return False if value is not None and value.ndim == 2 else None
