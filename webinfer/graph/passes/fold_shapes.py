"""Shape inference over symbolic dims (graph/shapes.py), then fold what it proves static: ``Shape(x)[-1]`` of a
static dim, the head count of ``reshape(q, [b, s, -1, 64])``, a scale ``1 / Sqrt(Cast(Shape(k)[-1:]))``.
Each replaced value becomes a constant and onnxscript's folder takes the arithmetic after it; repeated until
nothing more folds (a few rounds at most). With the shapes known, two no-ops exporters write go too: a Slice
that keeps its whole input (``x[..., :rot]`` with rot the full head size) and Concat inputs of length 0
(the empty pass-through half of a partial rotary embedding)."""

from __future__ import annotations

import onnx_ir as ir

from .. import shapes
from ..shapes import ShapeInference
from ._util import count_nodes, replace_value
from .dce import run as remove_dead
from .fold_constants import run as fold_constants

MAX_ROUNDS = 4
_BIG = 2**62


def _full_slice(si: ShapeInference, node: ir.Node) -> bool:
    """Slice(x, starts, ends, axes[, steps]) that keeps every element of x."""
    x = si.shape(node.inputs[0])
    args = [si.static_value(v) if v is not None else None for v in node.inputs[1:5]]
    if x is None or args[0] is None or args[1] is None:
        return False
    starts, ends = args[0], args[1]
    axes = args[2] if len(node.inputs) > 3 and node.inputs[3] is not None else list(range(len(starts)))
    steps = args[3] if len(node.inputs) > 4 and node.inputs[4] is not None else [1] * len(starts)
    if axes is None or steps is None:
        return False
    for s, e, a, st in zip(starts, ends, axes, steps):
        dim = x[a] if -len(x) <= a < len(x) else None
        if st != 1 or s != 0 or dim is None:
            return False
        if not (e >= _BIG or isinstance(dim, int) and e >= dim):
            return False
    return True


def _drop_empty_concat_inputs(si: ShapeInference, node: ir.Node) -> int:
    shape = si.shape(node.outputs[0])
    axis = node.attributes["axis"].as_int() if "axis" in node.attributes else 0
    if shape is None:
        return 0
    keep = []
    for v in node.inputs:
        s = si.shape(v)
        keep.append(not (s is not None and -len(s) <= axis < len(s) and s[axis] == 0))
    if all(keep) or not any(keep):
        return 0
    if sum(keep) == 1:
        return int(replace_value(node.graph, node.outputs[0], next(v for v, k in zip(node.inputs, keep) if k)))
    kept = [v for v, k in zip(node.inputs, keep) if k]
    for i in range(len(node.inputs) - 1, -1, -1):
        node.replace_input_with(i, None)
    node.resize_inputs(len(kept))
    for i, v in enumerate(kept):
        node.replace_input_with(i, v)
    return 1


def _simplify(model: ir.Model, si: ShapeInference) -> int:
    changed = 0
    for node in list(model.graph):
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type == "Slice" and _full_slice(si, node):
            changed += int(replace_value(model.graph, node.outputs[0], node.inputs[0]))
        elif node.op_type == "Concat":
            changed += _drop_empty_concat_inputs(si, node)
    return changed


def run(model: ir.Model) -> int:
    before = count_nodes(model)
    for _ in range(MAX_ROUNDS):
        folded = shapes.fold_static(model)
        simplified = _simplify(model, shapes.infer(model))
        if not folded and not simplified:
            break
        fold_constants(model)
        remove_dead(model)
    shapes.infer(model)
    return before - count_nodes(model)
