"""Shape ops: Shape, Size, Constant, views (Identity, Reshape, Flatten, Squeeze, Unsqueeze) and generated
tensors (ConstantOfShape, Range, EyeLike).

Views never copy (``ctx.set_alias``); Shape/Size produce host values (possibly symbolic dims) that feed
shape arithmetic; generated tensors of symbolic size are filled by ``generate.wgsl.j2``.
"""

from __future__ import annotations

import numpy as np
from onnx.helper import tensor_dtype_to_np_dtype

from ... import dims as D
from ... import shape_ops
from .. import emit
from ..emit import wgsl_literal
from ..nested import is_nested
from ..registry import lowering
from .helpers import compute_type, generate, normalize_axis


@lowering("Shape")
def lower_shape(ctx) -> None:
    shape = list(ctx.inputs[0].shape)
    r = len(shape)
    start, end = ctx.attr("start", 0), ctx.attr("end", r)
    start = min(max(start + r if start < 0 else start, 0), r)
    end = min(max(end + r if end < 0 else end, 0), r)
    dims = shape[start:end] if end > start else []
    ctx.set_host(0, "int64", (len(dims),), dims)


@lowering("Size")
def lower_size(ctx) -> None:
    ctx.set_host(0, "int64", (), [ctx.inputs[0].numel])


_CONSTANT_ATTRS = {"value_float": np.float32, "value_floats": np.float32, "value_int": np.int64,
                   "value_ints": np.int64}


@lowering("Constant")
def lower_constant(ctx) -> None:
    value = ctx.attr("value")
    if value is not None:
        return ctx.set_const(0, np.asarray(value))
    for name, dt in _CONSTANT_ATTRS.items():
        v = ctx.attr(name)
        if v is not None:
            return ctx.set_const(0, np.asarray(v, dtype=dt))
    raise ctx.unsupported("only numeric value attributes are supported (no strings or sparse tensors)")


@lowering("Identity")
def lower_identity(ctx) -> None:
    if is_nested(ctx.inputs[0]):  # a sequence or optional (codegen/nested.py) is passed on as it is
        ctx.where = "view"
        ctx._set(0, ctx.inputs[0])
        return
    ctx.set_alias(0, ctx.inputs[0], ctx.inputs[0].shape)


@lowering("Reshape")
def lower_reshape(ctx) -> None:
    x = ctx.inputs[0]
    target = ctx.host_ints(1)
    if target is None:
        raise ctx.unsupported("the target shape must be known at build time")
    allowzero = ctx.attr("allowzero", 0)
    shape: list = []
    for i, v in enumerate(target):
        shape.append(x.shape[i] if isinstance(v, int) and v == 0 and not allowzero else v)
    infer = [i for i, v in enumerate(shape) if isinstance(v, int) and v == -1]
    if len(infer) > 1:
        raise ctx.unsupported("more than one -1 in the target shape")
    if infer:
        known = D.product([v for i, v in enumerate(shape) if i != infer[0]])
        shape[infer[0]] = D.exact_div(x.numel, known)
    ctx.set_alias(0, x, shape)


@lowering("Flatten")
def lower_flatten(ctx) -> None:
    x = ctx.inputs[0]
    axis = ctx.attr("axis", 1)
    axis = axis + x.rank if axis < 0 else axis
    ctx.set_alias(0, x, (D.product(x.shape[:axis]), D.product(x.shape[axis:])))


def _axes(ctx):
    if ctx.has_input(1):
        axes = ctx.host_ints(1)
        if axes is None or not D.is_static(axes):
            raise ctx.unsupported("axes must be constants")
        return axes
    return ctx.attr("axes")


@lowering("Squeeze")
def lower_squeeze(ctx) -> None:
    x = ctx.inputs[0]
    axes = _axes(ctx)
    if axes is None:
        out_shape = ctx.node.outputs[0].shape  # shape inference's (graph/shapes.py made the same choice)
        drop = shape_ops.squeezed_axes(tuple(x.shape), None if out_shape is None else len(out_shape))
        for i in drop:
            if not isinstance(x.shape[i], int):  # squeezed as the exporter saw it: only right while it is 1
                why = f"Squeeze without axes drops {D.to_text(x.shape[i])}, which must then be 1"
                ctx.assume(D.add(x.shape[i], -1), why)
                ctx.assume(D.add(1, D.mul(x.shape[i], -1)), why)
    else:
        drop = {normalize_axis(a, x.rank) for a in axes}
    ctx.set_alias(0, x, [d for i, d in enumerate(x.shape) if i not in drop])


@lowering("Unsqueeze")
def lower_unsqueeze(ctx) -> None:
    x = ctx.inputs[0]
    axes = _axes(ctx)
    if axes is None:
        raise ctx.unsupported("axes are required")
    rank = x.rank + len(axes)
    ones = {normalize_axis(a, rank) for a in axes}
    rest = iter(x.shape)
    ctx.set_alias(0, x, [1 if i in ones else next(rest) for i in range(rank)])


@lowering("ConstantOfShape")
def lower_constant_of_shape(ctx) -> None:
    shape = ctx.host_ints(0)
    if shape is None:
        raise ctx.unsupported("the shape must be known at build time")
    value = ctx.attr("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    if D.is_static(shape):
        return ctx.set_const(0, np.full([int(d) for d in shape], value[0], dtype=value.dtype))
    out = ctx.output(0, value.dtype.name, shape)
    generate(ctx, out, wgsl_literal(value[0].item(), compute_type(out.dtype)))


def _integral(ctx, i: int) -> list | None:
    """A Range bound known at build time: shape arithmetic, or a float constant holding an integer (PyTorch's
    ``arange(w, dtype=float)`` exports ``Range(0.0, Cast(Shape(x)[3]), 1.0)``: the length is still a dim)."""
    vals = ctx.host_ints(i)
    t = ctx.inputs[i]
    if vals is None and t.value is not None and t.value.dtype.kind == "f" and t.value.size == 1:
        v = float(t.value.reshape(-1)[0])
        vals = [int(v)] if v.is_integer() else None
    return vals


@lowering("Range")
def lower_range(ctx) -> None:
    vals = [_integral(ctx, i) for i in range(3)]
    if any(v is None for v in vals):  # computed at run time: a counted length (select.py)
        from .select import range_of_data

        return range_of_data(ctx)
    (start,), (limit,), (delta,) = vals
    if not isinstance(delta, int) or delta == 0:
        raise ctx.unsupported("delta must be a non-zero constant")
    dt = ctx.inputs[0].dtype
    span = D.add(limit, D.mul(start, -1)) if delta > 0 else D.add(start, D.mul(limit, -1))
    n = D.ceildiv(span, abs(delta))
    n = max(n, 0) if isinstance(n, int) else n
    if isinstance(n, int) and n <= 64:
        return ctx.set_host(0, dt, (n,), [D.add(start, k * delta) for k in range(n)])
    out = ctx.output(0, dt, (n,))
    ct = compute_type(dt)
    # an integer start stays a uniform even when 0: Range(0, n) and Range(past, past + n) share one shader
    first = emit.offset(start, ct) if ct in ("i32", "u32") else (ct, start)
    generate(ctx, out, f"start + {ct}(gi) * delta", {"start": first, "delta": (ct, delta)})


@lowering("EyeLike")
def lower_eye_like(ctx) -> None:
    x = ctx.inputs[0]
    to = ctx.attr("dtype")
    dt = tensor_dtype_to_np_dtype(to).name if to is not None else x.dtype
    k = ctx.attr("k", 0)
    if x.rank != 2:
        raise ctx.unsupported("the input must be 2-D")
    if D.is_static(x.shape):
        return ctx.set_const(0, np.eye(x.shape[0], x.shape[1], k, dtype=dt))
    out = ctx.output(0, dt, x.shape)
    ct = compute_type(dt)
    one, zero = ("true", "false") if ct == "bool" else (f"{ct}(1)", f"{ct}(0)")
    generate(ctx, out, f"select({zero}, {one}, col - row == {wgsl_literal(int(k), 'i32')})", matrix=True)
