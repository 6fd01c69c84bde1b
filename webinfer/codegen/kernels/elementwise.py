"""Elementwise ops: one generic broadcasting kernel, and the op table is data (op -> WGSL expression).

Each entry maps an op to a function ``(ctx, args, in_types, out_type) -> expr``. ``args`` are the WGSL
names of the loaded inputs (``v0``, ``v1``, ...). Small integer tensors from shape arithmetic are
computed on the host instead (see ``host_elementwise``).
"""

from __future__ import annotations

import math

from ... import dims as D
from ... import shape_ops
from ...dtypes import dtype as get_dtype
from .. import packed
from ..emit import wgsl_literal
from ..registry import lowering
from . import elementwise_ops
from ._floats import FLOAT_HELPERS, helper_sources
from .helpers import broadcast_layout, broadcast_shapes, broadcast_strides, compute_type, contiguous_strides

F = lambda v: wgsl_literal(v, "f32")  # noqa: E731

# WGSL helper functions a kernel may need; included only when the expression uses them.
HELPERS = {
    "erf_f": """fn erf_f(x: f32) -> f32 {
  // Abramowitz & Stegun 7.1.26 is too coarse; use the W. J. Cody-style rational fit (|err| < 1.2e-7).
  let z = abs(x);
  let t = 1.0 / (1.0 + 0.5 * z);
  let r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
          t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
          t * (-0.82215223 + t * 0.17087277)))))))));
  return select(r - 1.0, 1.0 - r, x >= 0.0);
}""",
    # C's pow, as onnxruntime computes it: pow(x, 0) = pow(1, y) = 1 even for NaN; infinities by sign.
    "pow_f": """fn pow_f(a: f32, b: f32) -> f32 {
  if (b == 0.0 || a == 1.0) { return 1.0; }
  if (is_nan(a)) { return a; }
  if (is_nan(b)) { return b; }
  let inf = bitcast<f32>(0x7f800000u);
  let odd = b == floor(b) && (abs(b) % 2.0) == 1.0;
  if (abs(b) == inf) {
    if (abs(a) == 1.0) { return 1.0; }
    return select(0.0, inf, (abs(a) > 1.0) == (b > 0.0));
  }
  if (a == 0.0 || abs(a) == inf) {
    let big = (a == 0.0) == (b < 0.0);
    let r = select(0.0, inf, big);
    return select(r, -r, odd && (a < 0.0 || bitcast<u32>(a) == 0x80000000u));
  }
  if (a > 0.0) { return exp2(b * log2(a)); }
  if (b != floor(b)) { return bitcast<f32>(0x7fc00000u); }
  let r = exp2(b * log2(-a));
  return select(r, -r, odd);
}""",
    "pow_i": """fn pow_i(a: i32, b: i32) -> i32 {
  var r = 1i; var e = b; var x = a;
  if (e < 0) { return select(0i, 1i, a == 1i); }
  loop { if (e == 0) { break; } if ((e & 1) == 1) { r = r * x; } x = x * x; e = e >> 1u; }
  return r;
}""",
    "tanh_f": "fn tanh_f(x: f32) -> f32 { return keep_nan(x, tanh(clamp(x, -20.0, 20.0))); }",
    "sigmoid_f": """fn sigmoid_f(x: f32) -> f32 {
  if (x >= 0.0) { return 1.0 / (1.0 + exp(-x)); }
  let e = exp(x); return e / (1.0 + e);
}""",
}


def _float_unary(fmt: str):
    return lambda ctx, a, it, ot: fmt.format(*a)


def _cast(ctx, a, it, ot):
    mode = ctx.attr("round_mode", "up")
    return cast_expr(a[0], it[0], ctx.attr("to_dtype"), saturate=bool(ctx.attr("saturate", 1)),
                     round_mode=mode if mode in ("up", "down", "nearest") else "up")


def cast_expr(v: str, src_dtype: str, dst_dtype: str, saturate: bool = True, round_mode: str = "up") -> str:
    """A WGSL expression converting a loaded value to another ONNX type's compute type.

    Packed targets (bfloat16, float8, 4/2-bit) give the value the stored code will hold: floats rounded
    to nearest even (clamped to the largest finite value first when ``saturate``, as ONNX's Cast says for
    float8), integers truncated and wrapped to their width like numpy's ``astype``."""
    src, dst = get_dtype(src_dtype).compute, get_dtype(dst_dtype).compute
    if dst == "bool":
        return v if src == "bool" else f"({v} != {src}(0))"
    if src == "bool":
        return f"select({dst}(0), {dst}(1), {v})"
    if get_dtype(dst_dtype).packed and dst == "f32":
        v = v if src == "f32" else f"f32({v})"
        v = packed.saturate_expr(dst_dtype, v) if saturate else v
        return packed.round_trip_expr(dst_dtype, v, round_mode=round_mode, saturate=saturate)
    if src == "f32" and dst != "f32":
        v = f"trunc({v})"
        if dst == "u32" and get_dtype(dst_dtype).packed:  # negative floats wrap (via i32), as numpy's do
            v = f"i32({v})"
    out = f"{dst}({v})" if src != dst else v
    if get_dtype(dst_dtype).packed:
        return packed.round_trip_expr(dst_dtype, out)
    if dst_dtype == "uint8":
        out = f"({out} & 0xffu)"
    elif dst_dtype == "int8":
        out = f"((({out} & 0xff) ^ 0x80) - 0x80)"
    elif dst_dtype == "uint16":
        out = f"({out} & 0xffffu)"
    elif dst_dtype == "int16":
        out = f"((({out} & 0xffff) ^ 0x8000) - 0x8000)"
    elif dst_dtype == "float16":
        out = packed.f16_round_expr(out)
    return out


def _binop(sym: str):
    return lambda ctx, a, it, ot: f"({a[0]} {sym} {a[1]})"


def _div(ctx, a, it, ot):
    """Integer division truncates (WGSL and ONNX agree); by zero it is 0 as in the reference."""
    return f"({a[0]} / {a[1]})" if ot == "f32" else f"select({ot}(0), {a[0]} / {a[1]}, {a[1]} != {ot}(0))"


def _pow(ctx, a, it, ot):
    """The result has the base's type; an integer base with a float exponent truncates (numpy astype)."""
    if ot == "f32":
        return f"pow_f({a[0]}, f32({a[1]}))"
    if compute_type(it[1]) == "f32":
        return f"{ot}(trunc(pow_f(f32({a[0]}), {a[1]})))"
    return f"{ot}(pow_i(i32({a[0]}), i32({a[1]})))"


def _leaky(ctx, a, it, ot):
    return f"select({F(ctx.attr('alpha', 0.01))} * {a[0]}, {a[0]}, {a[0]} >= 0.0)"


def _hard_sigmoid(ctx, a, it, ot):
    return f"clip_nan({F(ctx.attr('alpha', 0.2))} * {a[0]} + {F(ctx.attr('beta', 0.5))}, 0.0, 1.0)"


def _gelu(ctx, a, it, ot):
    x = a[0]
    if ctx.attr("approximate", "none") == "tanh":
        return f"(0.5 * {x} * (1.0 + tanh_f({F(math.sqrt(2 / math.pi))} * ({x} + 0.044715 * {x} * {x} * {x}))))"
    return f"(0.5 * {x} * (1.0 + erf_f({x} * {F(1 / math.sqrt(2))})))"


def _clip(ctx, a, it, ot):
    """Floats: a NaN input stays NaN, a missing bound is the largest finite float (onnxruntime and the spec
    clip infinities to it)."""
    x = a[0]
    if ot == "f32":
        lo = a[1] if len(a) > 1 and a[1] != "" else F(-FLT_MAX)
        hi = a[2] if len(a) > 2 and a[2] != "" else F(FLT_MAX)
        return f"clip_nan({x}, {lo}, {hi})"
    if len(a) > 1 and a[1] != "":
        x = f"max({x}, {a[1]})"
    if len(a) > 2 and a[2] != "":
        x = f"min({x}, {a[2]})"
    return x


def _variadic(fn: str):
    def expr(ctx, a, it, ot):
        name = f"{fn}_nan" if fn and ot == "f32" else fn  # Max/Min: a NaN wins
        out = a[0]
        for x in a[1:]:
            out = f"{name}({out}, {x})" if fn else f"({out} + {x})"
        return out

    return expr


def _mean(ctx, a, it, ot):
    return f"({_variadic('')(ctx, a, it, ot)} / {F(len(a))})"


# op -> (expression builder, output type rule): "same" (first input), "bool", or "cast".
OPS = {
    "Add": (_binop("+"), "same"),
    "Sub": (_binop("-"), "same"),
    "Mul": (_binop("*"), "same"),
    "Div": (_div, "same"),
    "Pow": (_pow, "same"),
    "Neg": (_float_unary("(-{0})"), "same"),
    "Abs": (_float_unary("abs({0})"), "same"),
    "Sqrt": (_float_unary("sqrt({0})"), "same"),
    "Reciprocal": (_float_unary("(1.0 / {0})"), "same"),
    "Exp": (_float_unary("exp({0})"), "same"),
    "Log": (_float_unary("log({0})"), "same"),
    "Erf": (_float_unary("erf_f({0})"), "same"),
    "Tanh": (_float_unary("tanh_f({0})"), "same"),
    "Sigmoid": (_float_unary("sigmoid_f({0})"), "same"),
    "Relu": (lambda ctx, a, it, ot: f"max_nan({a[0]}, 0.0)" if ot == "f32" else f"max({a[0]}, {ot}(0))", "same"),
    "LeakyRelu": (_leaky, "same"),
    "HardSigmoid": (_hard_sigmoid, "same"),
    "HardSwish": (_float_unary("({0} * clamp({0} / 6.0 + 0.5, 0.0, 1.0))"), "same"),
    "Gelu": (_gelu, "same"),
    "Clip": (_clip, "same"),
    "Where": (lambda ctx, a, it, ot: f"select({a[2]}, {a[1]}, {a[0]})", "where"),
    "Equal": (_binop("=="), "bool"),
    "Less": (_binop("<"), "bool"),
    "Greater": (_binop(">"), "bool"),
    "LessOrEqual": (_binop("<="), "bool"),
    "GreaterOrEqual": (_binop(">="), "bool"),
    "Not": (_float_unary("(!{0})"), "bool"),
    "And": (_binop("&&"), "bool"),
    "Or": (_binop("||"), "bool"),
    "Xor": (_binop("!="), "bool"),
    "Cast": (_cast, "cast"),
    "Max": (_variadic("max"), "same"),
    "Min": (_variadic("min"), "same"),
    "Sum": (_variadic(""), "same"),
    "Mean": (_mean, "same"),
    **elementwise_ops.OPS,
}
HELPERS.update(elementwise_ops.HELPERS)
HELPERS.update(FLOAT_HELPERS)
FLT_MAX = 3.4028234663852886e38
_WRAPPING = {"Add", "Sub", "Mul", "Neg", "Abs", "Sum", "Pow", "BitShift", "BitwiseNot"}


def out_dtype(ctx, rule: str) -> str:
    if rule == "bool":
        return "bool"
    if rule == "cast":
        from onnx.helper import tensor_dtype_to_np_dtype

        return tensor_dtype_to_np_dtype(ctx.attr("to")).name
    if rule == "where":
        return ctx.inputs[1].dtype
    return next(t.dtype for t in ctx.inputs if t is not None)


@lowering(*OPS)
def lower_elementwise(ctx) -> None:
    build, rule = OPS[ctx.op]
    dt = out_dtype(ctx, rule)
    present = [(i, t) for i, t in enumerate(ctx.inputs) if t is not None]
    shape = broadcast_shapes([t.shape for _, t in present])
    if host_elementwise(ctx, dt, shape):
        return
    assume_broadcast(ctx, [t.shape for _, t in present], shape)
    out = ctx.output(0, dt, shape)
    if ctx.op in _WRAPPING and dt in ("uint8", "uint16", "int8", "int16"):
        inner = build
        build = lambda c, a, it, ot: elementwise_ops.narrow(inner(c, a, it, ot), dt)  # noqa: E731
    elementwise(ctx, build, [t for _, t in present], out, [i for i, _ in present])


@lowering("CastLike")
def lower_castlike(ctx) -> None:
    """Cast to the type of input 1, which gives only its type (the clean-up passes usually rewrite CastLike
    into Cast already; this covers what they leave)."""
    x = ctx.inputs[0]
    elementwise(ctx, _cast, [x], ctx.output(0, ctx.inputs[1].dtype, x.shape))


def elementwise(ctx, build, inputs, out, positions=None) -> None:
    """Emit the broadcasting kernel computing ``build(...)`` of ``inputs`` into ``out``."""
    positions = positions if positions is not None else list(range(len(inputs)))
    ot = compute_type(out.dtype)
    args = [""] * (max(positions) + 1)
    bound, uniforms = [], {}
    for t, pos in zip(inputs, positions):
        args[pos] = symbolic_scalar(t, f"c{pos}", uniforms)
        if args[pos] is None:
            args[pos] = f"v{len(bound)}"
            bound.append(t)
    expr = build(_Attrs(ctx, out.dtype), args, [t.dtype for t in inputs], ot)
    # Mixed input types (Pow's exponent, Where's condition) are converted where the op needs it.
    params, rank, scalar, contiguous = index_space(bound, out)
    helpers = helper_sources(expr, HELPERS)
    ctx.dispatch("elementwise.wgsl.j2", {f"x{k}": ctx.gpu(t) for k, t in enumerate(bound)}, {"out": out},
                 work=out.numel, params={**params, **uniforms}, arity=len(bound), rank=rank,
                 contiguous=contiguous, scalar=scalar, expr=expr, helpers=helpers,
                 in_types=[compute_type(t.dtype) for t in bound])


def symbolic_scalar(t, name: str, params: dict) -> str | None:
    """A one-element integer from shape arithmetic not known until run time (``seq - 1``): a uniform
    ``name`` in ``params``, read as a value (no buffer to fill, no binding); None for anything else."""
    if t is None or t.sym is None or len(t.sym) != 1 or compute_type(t.dtype) not in ("i32", "u32"):
        return None
    typ = compute_type(t.dtype)
    params[name] = (typ, t.sym[0])
    return f"params.{name}" if not isinstance(t.sym[0], int) else wgsl_literal(t.sym[0], typ)


def index_space(inputs: list, out) -> tuple[dict, int, list[bool], bool]:
    """How elementwise.wgsl.j2 indexes ``inputs`` at each output element: (params, rank, scalar, contiguous).
    Contiguous: each input is read at the output's index, or (scalar) at 0; else the coalesced broadcasting
    space (helpers.broadcast_layout) with its dims and strides as params."""
    params: dict = {"n": out.numel}
    scalar = [D.is_static(t.shape) and D.product(t.shape) == 1 for t in inputs]
    if all(s or tuple(t.shape) == tuple(out.shape) for s, t in zip(scalar, inputs)):
        return params, out.rank, scalar, True
    dims, strides = broadcast_layout([t.shape for t in inputs], out.shape)
    if len(dims) <= 1 and all(not st or st[0] in (0, 1) for st in strides):
        return params, len(dims), [not st or st[0] == 0 for st in strides], True
    for d, dim in enumerate(dims):
        params[f"d{d}"] = dim
    for k, st in enumerate(strides):
        for d, s in enumerate(st):
            params[f"s{k}_{d}"] = s
    return params, len(dims), scalar, False


class _Attrs:
    """Lets expression builders read attributes, with Cast's target type resolved."""

    def __init__(self, ctx, out_dtype: str):
        self._ctx, self._out = ctx, out_dtype

    def attr(self, name, default=None):
        if name == "to_dtype":
            return self._out
        return self._ctx.attr(name, default)


def assume_broadcast(ctx, shapes, out) -> None:
    """Broadcasting takes a symbolic dim to match the other inputs' (the strides are fixed at build time), as in
    an FPN's ``Resize(p5, 2) + p4``: ``2*((H + 31) // 32)`` and ``(H + 15) // 16`` agree only when 32 divides H.
    Each such side condition becomes a pair of guards, so other sizes get a one-line error, never a wrong read."""
    for s in shapes:
        for d, o in zip(reversed(s), reversed(out)):
            if d == o or d == 1 or isinstance(d, int) and isinstance(o, int):
                continue
            diff = D.add(d, D.mul(o, -1))
            why = f"broadcasting needs {D.to_text(d)} == {D.to_text(o)}"
            ctx.assume(diff, why)
            ctx.assume(D.mul(diff, -1), why)


def host_elementwise(ctx, dt: str, shape) -> bool:
    """Shape arithmetic on small symbolic integer tensors runs at build time, as dim expressions (shape_ops.HOST_OPS:
    the evaluator graph/shapes.py uses too)."""
    op = "Identity" if ctx.op == "Cast" else ctx.op
    if op not in shape_ops.HOST_OPS or not D.is_static(shape):
        return False
    # (a Cast of dims to float keeps them: exact integers, which a float Range or a size's scale reads)
    if dt not in ("int64", "int32") and not (op in shape_ops.BOOL_OPS and dt == "bool") and \
            not (ctx.op == "Cast" and dt in ("float32", "float64") and ctx.inputs[0].dtype in ("int64", "int32")):
        return False
    present = [t for t in ctx.inputs if t is not None]
    if not any(t.sym is not None for t in present):
        return False
    vals = [ctx.host_ints(i) for i, t in enumerate(ctx.inputs) if t is not None]
    if any(v is None for v in vals):
        return False
    n = D.product(shape)
    out = []
    strides = [broadcast_strides(t.shape, shape) for t in present]
    for flat in range(n):
        coords, rem = [], flat
        for d in reversed(shape):
            coords.append(rem % d)
            rem //= d
        coords.reverse()
        args = [v[sum(c * s for c, s in zip(coords, st))] for v, st in zip(vals, strides)]
        try:
            out.append(shape_ops.host_op(op, args))
        except shape_ops.Undecidable:
            return False
    ctx.set_host(0, dt, shape, out)
    return True


__all__ = ["elementwise", "cast_expr", "contiguous_strides"]
