"""The per-op rules of graph/shapes.py's inference: the ops that carry shapes as data (Shape, Gather, Slice,
Concat, Reshape, Expand, integer arithmetic, Range, the window ops' output sizes ...), each a function of the
walk (``si``: its shapes and small integer values so far) and the node, returning the output shape or None.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import onnx_ir as ir

from .. import dims as D
from .. import opschema, shape_ops
from ..dims import Dim
from ..opschema import HOST_MAX_ELEMENTS

if TYPE_CHECKING:
    from .shapes import ShapeInference

_INT64_BIG = 2**62
_ARITH = ("Add", "Sub", "Mul", "Div", "Mod", "Max", "Min")  # shape_ops.HOST_OPS, as the lowerings
_nonnegative = D.nonnegative


def const(v: ir.Value) -> np.ndarray | None:
    if v.is_graph_input():
        return None
    if v.const_value is not None:
        return v.const_value.numpy()
    node = v.producer()
    if node is not None and node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
        attr = node.attributes.get("value")
        if attr is not None:
            return attr.as_tensor().numpy()
        for name in ("value_int", "value_ints"):
            if name in node.attributes:
                return np.array(node.attributes[name].value, dtype=np.int64)
    return None


def _attr(node: ir.Node, name: str, default=None):
    a = node.attributes.get(name)
    if a is None:
        return default
    return list(a.value) if isinstance(a.value, (list, tuple)) else a.value


def _axis(a: int, rank: int) -> int:
    a = int(a)
    if not -rank <= a < max(rank, 1):
        raise ValueError(f"axis {a} out of range for rank {rank}")
    return a + rank if a < 0 else a


def _numel(shape) -> Dim | None:
    if shape is None or any(d is None for d in shape):
        return None
    return D.product(shape)


def _broadcast(shapes) -> tuple | None:
    if any(s is None for s in shapes):
        return None
    rank = max(len(s) for s in shapes)
    out = []
    for axis in range(rank):
        dims = [s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0]
        non_one = [d for d in dims if d != 1]
        if not non_one:
            out.append(1)
            continue
        fixed = [d for d in non_one if isinstance(d, int)]
        known = [d for d in non_one if d is not None]
        out.append(fixed[0] if fixed else (known[0] if len(set(map(repr, known))) == 1 and
                                           len(known) == len(non_one) else None))
    return tuple(out)


# -- rules: ops whose outputs depend on shapes or small integer data ------------------------------
def _shape_op(si: ShapeInference, node: ir.Node):
    shape = si.shape(node.inputs[0])
    if shape is None:
        return None
    r = len(shape)
    start, end = int(_attr(node, "start", 0)), int(_attr(node, "end", r))
    start = min(max(start + r if start < 0 else start, 0), r)
    end = min(max(end + r if end < 0 else end, 0), r)
    dims = list(shape[start:end]) if end > start else []
    return [(len(dims),)], [dims]


def _size(si, node):
    n = _numel(si.shape(node.inputs[0]))
    return [()], [[n] if n is not None else None]


def _passthrough_value(si, node, shape):
    vals = si.value(node.inputs[0])
    return [shape], [vals]


def _reshape(si: ShapeInference, node: ir.Node):
    x = si.shape(node.inputs[0])
    target = si.value(node.inputs[1])
    if target is None:
        return None
    allowzero = int(_attr(node, "allowzero", 0))
    shape = [x[i] if (x is not None and isinstance(v, int) and v == 0 and not allowzero) else v
             for i, v in enumerate(target)]
    infer = [i for i, v in enumerate(shape) if isinstance(v, int) and v == -1]
    if infer:
        total = _numel(x)
        known = [v for i, v in enumerate(shape) if i != infer[0]]
        if total is None or any(v is None for v in known):
            shape[infer[0]] = None
        else:
            shape[infer[0]] = D.exact_div(total, D.product(known))
    return _passthrough_value(si, node, tuple(shape))


def _unsqueeze(si, node):
    x = si.shape(node.inputs[0])
    axes = si.static_value(node.inputs[1]) if len(node.inputs) > 1 else _attr(node, "axes")
    if x is None or axes is None:
        return None
    rank = len(x) + len(axes)
    ones = {_axis(a, rank) for a in axes}
    rest = iter(x)
    return _passthrough_value(si, node, tuple(1 if i in ones else next(rest) for i in range(rank)))


def _squeeze(si, node):
    x = si.shape(node.inputs[0])
    axes = si.static_value(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] is not None \
        else _attr(node, "axes")
    if x is None:
        return None
    if axes is None:
        declared = _declared_shape(node.outputs[0])
        rank = None if declared is None else len(declared)
        if declared is not None and not shape_ops.traced_squeeze_fits(x, list(declared), si.input_dim_names()):
            rank = -1  # a declared shape no traced-at-1 drop gives (madmom's rank-1 outputs): ONNX's rule, keep them
        if rank is None and any(not isinstance(d, int) for d in x):
            si.open_squeezes.append(node)  # infer() may try dropping them (the graph outputs' declared ranks)
            if node in si.squeeze_drop:
                rank = sum(1 for d in x if isinstance(d, int) and d != 1)
        drop = shape_ops.squeezed_axes(x, rank)
    else:
        drop = {_axis(a, len(x)) for a in axes}
    return _passthrough_value(si, node, tuple(d for i, d in enumerate(x) if i not in drop))


def _declared_shape(v: ir.Value, steps: int = 8) -> ir.Shape | None:
    """The shape the exporter declared for ``v``, or for the first declared value it flows into through elementwise
    ops whose other operands are single constants (a score head's Squeeze -> Sigmoid -> Mul -> Add -> output)."""
    for _ in range(steps):
        if v.shape is not None:
            return v.shape
        uses = list(v.uses())
        if len(uses) != 1 or v.is_graph_output():
            return None
        node = uses[0].node
        if node.op_type not in opschema.elementwise_ops() or len(node.outputs) != 1:
            return None
        for other in node.inputs:
            if other is not v and (other is None or (c := const(other)) is None or c.size != 1 or c.ndim > 0):
                return None
        v = node.outputs[0]
    return None


def _identity(si, node):
    return _passthrough_value(si, node, si.shape(node.inputs[0]))


def _cast(si, node):
    to = ir.DataType(int(_attr(node, "to")))
    si.dtypes[node.outputs[0]] = to
    vals = si.value(node.inputs[0])
    src = si.dtype(node.inputs[0])
    # dims cast to float stay dims (exact integers), as in the lowerings: a float Range's length is a dim
    keep = vals is not None and (to.is_integer() and to not in (ir.DataType.BOOL,) or
                                 to in (ir.DataType.FLOAT, ir.DataType.DOUBLE) and src is not None and src.is_integer())
    return [si.shape(node.inputs[0])], [vals if keep else None]


def _gather(si: ShapeInference, node: ir.Node):
    data, idx = si.shape(node.inputs[0]), si.shape(node.inputs[1])
    if data is None or idx is None:
        return None
    axis = _axis(_attr(node, "axis", 0), len(data))
    shape = tuple(data[:axis]) + tuple(idx) + tuple(data[axis + 1:])
    vals, ids = si.value(node.inputs[0]), si.static_value(node.inputs[1])
    out = None
    if vals is not None and ids is not None and len(data) == 1 and isinstance(data[0], int):
        out = [vals[i + data[0] if i < 0 else i] for i in ids]
    return [shape], [out]


def _slice_bounds(dim: Dim | None, start: Dim | None, end: Dim | None, step: Dim | None) -> Dim | None:
    """Length of ``range(dim)[start:end:step]`` where the dim or the bounds may be symbolic.

    Symbolic bounds (``mask[..., past:past + seq]``) are taken to lie inside the dim, as a model whose
    slices run past the end of a table (say, positions beyond the maximum) is not valid anyway."""
    if isinstance(dim, int) and isinstance(start, int) and isinstance(end, int) and isinstance(step, int):
        return len(range(dim)[slice(start, end, step)])
    if dim is None or start is None or end is None or step != 1:
        return None
    if isinstance(end, int) and 0 <= end < _INT64_BIG and not (isinstance(dim, int) and end <= dim):
        return None  # min(end, dim) is unknown for a symbolic dim
    if isinstance(start, int) and start < 0:
        start = D.add(dim, start)
    elif not isinstance(start, int) and not _nonnegative(start):
        return None
    if isinstance(end, int):
        end = dim if end >= _INT64_BIG else (D.add(dim, end) if end < 0 else end)
    elif not _nonnegative(end):
        return None
    return D.add(end, D.mul(start, -1))


def _slice(si: ShapeInference, node: ir.Node):
    x = si.shape(node.inputs[0])
    if x is None:
        return None
    starts, ends = si.value(node.inputs[1]), si.value(node.inputs[2])
    if starts is None or ends is None:
        return None
    axes = si.static_value(node.inputs[3]) if len(node.inputs) > 3 and node.inputs[3] is not None \
        else list(range(len(starts)))
    steps = si.value(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] is not None \
        else [1] * len(starts)
    if axes is None or steps is None:
        return None
    shape = list(x)
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = _axis(a, len(x))
        shape[a] = _slice_bounds(x[a], s, e, st)
    vals = si.value(node.inputs[0])
    out = None
    if vals is not None and len(x) == 1 and isinstance(x[0], int) and D.is_static([starts[0], ends[0], steps[0]]):
        out = vals[slice(starts[0], ends[0], steps[0])]
    return [tuple(shape)], [out]


def _flatten(si: ShapeInference, node: ir.Node):
    x = si.shape(node.inputs[0])
    if x is None:
        return None
    axis = int(_attr(node, "axis", 1))
    axis = axis + len(x) if axis < 0 else axis
    return _passthrough_value(si, node, (_numel(x[:axis]), _numel(x[axis:])))


def _concat(si: ShapeInference, node: ir.Node):
    shapes = [si.shape(v) for v in node.inputs]
    if any(s is None for s in shapes):
        return None
    axis = _axis(_attr(node, "axis", 0), len(shapes[0]))
    shape = list(shapes[0])
    total: Dim | None = 0
    for s in shapes:
        total = None if total is None or s[axis] is None else D.add(total, s[axis])
    shape[axis] = total
    for i in range(len(shape)):
        if i != axis and shape[i] is None:
            shape[i] = next((s[i] for s in shapes if s[i] is not None), None)
    vals = [si.value(v) for v in node.inputs]
    out = None
    if len(shape) == 1 and all(v is not None for v in vals):
        out = [x for v in vals for x in v]
    return [tuple(shape)], [out]


def _arith(si: ShapeInference, node: ir.Node):
    shapes = [si.shape(v) for v in node.inputs]
    shape = _broadcast(shapes)
    if shape is None:
        return None
    vals = [si.value(v) for v in node.inputs]
    out = None
    n = _numel(shape)
    if all(v is not None for v in vals) and isinstance(n, int) and n <= HOST_MAX_ELEMENTS:
        if all(len(v) in (1, n) for v in vals):
            integer = si.dtype(node.inputs[0]) is not None and si.dtype(node.inputs[0]).is_integer()
            if node.op_type in shape_ops.BOOL_OPS or integer:
                out = [shape_ops.host_op_or_none(node.op_type, [v[i % len(v)] for v in vals]) for i in range(n)]
    if node.op_type in shape_ops.BOOL_OPS:
        si.dtypes[node.outputs[0]] = ir.DataType.BOOL
    return [shape], [out]


def _neg(si, node):
    vals = si.value(node.inputs[0])
    out = [shape_ops.host_op_or_none("Neg", [v]) for v in vals] if vals is not None else None
    return [si.shape(node.inputs[0])], [out]


def _where(si: ShapeInference, node: ir.Node):
    shape = _broadcast([si.shape(v) for v in node.inputs])
    if shape is None:
        return None
    cond, a, b = (si.value(v) for v in node.inputs)
    n = _numel(shape)
    out = None
    if cond is not None and a is not None and b is not None and isinstance(n, int):
        if all(len(v) in (1, n) for v in (cond, a, b)):
            picks = [cond[i % len(cond)] for i in range(n)]
            out = [shape_ops.host_op_or_none("Where", [c, a[i % len(a)], b[i % len(b)]]) for i, c in enumerate(picks)]
    return [shape], [out]


def _expand(si: ShapeInference, node: ir.Node):
    x, target = si.shape(node.inputs[0]), si.value(node.inputs[1])
    if x is None or target is None:
        return None
    shape = _broadcast([x, tuple(target)])
    vals = si.value(node.inputs[0])
    n = _numel(shape) if shape is not None else None
    out = vals * n if vals is not None and len(vals) == 1 and isinstance(n, int) and n <= HOST_MAX_ELEMENTS \
        else None
    return [shape], [out]


def _constant_of_shape(si: ShapeInference, node: ir.Node):
    target = si.value(node.inputs[0])
    if target is None:
        return None
    value = node.attributes.get("value")
    array = value.as_tensor().numpy().reshape(-1) if value is not None else np.zeros(1, np.float32)
    si.dtypes[node.outputs[0]] = ir.DataType.from_numpy(array.dtype)
    n = _numel(tuple(target))
    out = None
    if isinstance(n, int) and n <= HOST_MAX_ELEMENTS and array.dtype.kind in "iu":
        out = [int(array[0])] * n
    return [tuple(target)], [out]


def _integral(si: ShapeInference, v: ir.Value) -> list | None:
    """A Range bound as dims: shape arithmetic, or a float constant holding an integer (codegen's shape.py too)."""
    vals = si.value(v)
    array = const(v) if vals is None else None
    if array is not None and array.dtype.kind == "f" and array.size == 1 and float(array.reshape(-1)[0]).is_integer():
        vals = [int(array.reshape(-1)[0])]
    return vals


def _range(si: ShapeInference, node: ir.Node):
    vals = [_integral(si, v) for v in node.inputs]
    if any(v is None or len(v) != 1 or v[0] is None for v in vals):
        return None
    (start,), (limit,), (delta,) = vals
    if not isinstance(delta, int) or delta == 0:
        return None
    span = D.add(limit, D.mul(start, -1)) if delta > 0 else D.add(start, D.mul(limit, -1))
    n = D.ceildiv(span, abs(delta))
    if isinstance(n, int):
        n = max(n, 0)
        if n <= HOST_MAX_ELEMENTS:
            return [(n,)], [[D.add(start, k * delta) for k in range(n)]]
    return [(n,)], [None]


def _window(si: ShapeInference, node: ir.Node):
    """Conv and pooling output sizes with dims.window_axis, the lowerings' rule (ONNX's own inference gives up
    on symbolic spatial dims, so a Shape of a feature map would be unknown here and known in codegen)."""
    x = si.shape(node.inputs[0])
    if x is None or len(x) < 3 or len(node.outputs) > 1 and node.outputs[1].name:
        return None
    r = len(x) - 2
    if node.op_type == "Conv":
        w = si.shape(node.inputs[1])
        if w is None or len(w) != len(x):
            return None
        channels, kernel = w[0], _attr(node, "kernel_shape", list(w[2:]))
    else:
        channels, kernel = x[1], _attr(node, "kernel_shape")
    if kernel is None or not D.is_static(kernel) or len(kernel) != r:
        return None
    strides, dil = _attr(node, "strides", [1] * r), _attr(node, "dilations", [1] * r)
    pads = _attr(node, "pads", [0] * (2 * r))
    auto = _attr(node, "auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    ceil = bool(_attr(node, "ceil_mode", 0))
    if any(d is None for d in x[2:]) or min(list(strides) + list(dil), default=1) < 1:
        return None
    out = [shape_ops.window_axis(x[2 + i], int(kernel[i]), int(strides[i]), int(dil[i]), int(pads[i]),
                                 int(pads[i + r]), ceil, auto)[0] for i in range(r)]
    return [(x[0], channels, *out)], []


RULES = {
    "Shape": _shape_op, "Size": _size, "Reshape": _reshape, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze,
    "Identity": _identity, "Flatten": _flatten, "Cast": _cast, "Gather": _gather, "Slice": _slice, "Concat": _concat,
    "Neg": _neg, "Where": _where, "Expand": _expand, "ConstantOfShape": _constant_of_shape, "Range": _range,
    "Conv": _window, "MaxPool": _window, "AveragePool": _window, "LpPool": _window,
    **{op: _arith for op in (*_ARITH, *shape_ops.BOOL_OPS)},
}
