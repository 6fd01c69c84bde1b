"""More of the elementwise op table: math, activations with attributes, integer and bitwise ops.

Entries have the shape of ``elementwise.OPS``: ``op -> (builder(ctx, args, in_dtypes, out_type), rule)``.
Integer semantics follow ONNX's reference (numpy): truncating Div, Mod by the sign of the divisor unless
``fmod``, zero on division by zero.
"""

from __future__ import annotations

from ..emit import wgsl_literal

F = lambda v: wgsl_literal(v, "f32")  # noqa: E731

HELPERS = {
    "softplus_f": "fn softplus_f(x: f32) -> f32 { return max(x, 0.0) + log(1.0 + exp(-abs(x))); }",
    "mod_i": """fn mod_i(a: i32, b: i32) -> i32 {
  if (b == 0i) { return 0i; }
  let r = a % b;
  return select(r, r + b, r != 0i && ((r < 0i) != (b < 0i)));
}""",
    "fmod_i": "fn fmod_i(a: i32, b: i32) -> i32 { return select(0i, a % b, b != 0i); }",
    "mod_u": "fn mod_u(a: u32, b: u32) -> u32 { return select(0u, a % b, b != 0u); }",
    # C's fmod (onnxruntime): NaN for a NaN, an infinite dividend or a zero divisor; x for an infinite divisor.
    "fmod_f": """fn fmod_f(a: f32, b: f32) -> f32 {
  if (is_nan(a) || is_nan(b) || abs(a) > 3.4028235e38 || b == 0.0) { return bitcast<f32>(0x7fc00000u); }
  if (abs(b) > 3.4028235e38) { return a; }
  return a - b * trunc(a / b);
}""",
    # lavapipe's asin/acos are off by up to 4e-4; atan2 of the exact legs is within 1e-6.
    # (NaN outside [-1, 1] and for NaN, which lavapipe's atan/atan2 turn into numbers)
    "asin_f": """fn asin_f(x: f32) -> f32 {
  if (!(abs(x) <= 1.0) || is_nan(x)) { return bitcast<f32>(0x7fc00000u); }
  return atan2(x, sqrt((1.0 - x) * (1.0 + x)));
}""",
    "acos_f": """fn acos_f(x: f32) -> f32 {
  if (!(abs(x) <= 1.0) || is_nan(x)) { return bitcast<f32>(0x7fc00000u); }
  return atan2(sqrt((1.0 - x) * (1.0 + x)), x);
}""",
    "atan_f": "fn atan_f(x: f32) -> f32 { return keep_nan(x, atan(x)); }",
    # sin/cos/tan to ~1 ulp of f32, not the built-ins: WGSL lets those be approximate (absolute error 2^-11) and
    # SwiftShader's (Chromium without a GPU) are off by up to 1.9e-4 where lavapipe's are within 1.4 ulp, which
    # moved a Llama's rotary tables enough to flip a near-tie greedy id in the page (docs/notes.md). The nearest
    # multiple k of pi/2 is taken off in four parts (Cody-Waite; the first three of 8 bits, so k * part is exact
    # for |k| < 2^16), the rest (|r| <= pi/4) by Cephes' sinf/cosf polynomials. Past |x| = 65536, and for
    # NaN and infinities, the built-ins (an f32 there is coarser than pi/4 anyway); sin and tan keep ±0.
    "sincos_f": """fn sincos_f(x: f32) -> vec2<f32> {
  let k = round(x * 0.6366197723675814);
  let r = (((x - k * 1.5703125) - k * 4.825592041015625e-4) - k * 1.2665987014770508e-6) - k * 9.92093629470503e-10;
  let z = r * r;
  let s = r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
  let c = 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5));
  switch i32(k) & 3 {
    case 1: { return vec2<f32>(c, -s); }
    case 2: { return vec2<f32>(-s, -c); }
    case 3: { return vec2<f32>(-c, s); }
    default: { return vec2<f32>(s, c); }
  }
}""",
    "sin_f": """fn sin_f(x: f32) -> f32 {
  if (x == 0.0) { return x; }
  if (!(abs(x) <= 65536.0)) { return sin(x); }
  return sincos_f(x).x;
}""",
    "cos_f": "fn cos_f(x: f32) -> f32 { if (!(abs(x) <= 65536.0)) { return cos(x); } return sincos_f(x).y; }",
    "tan_f": """fn tan_f(x: f32) -> f32 {
  if (x == 0.0) { return x; }
  if (!(abs(x) <= 65536.0)) { return tan(x); }
  let sc = sincos_f(x);
  return sc.x / sc.y;
}""",
}

_MASK = {"uint8": "0xffu", "uint16": "0xffffu"}


def narrow(expr: str, dtype: str) -> str:
    """Wrap an integer result to its ONNX width (values live widened to 32 bits on the GPU)."""
    if dtype in _MASK:
        return f"({expr} & {_MASK[dtype]})"
    if dtype == "int8":
        return f"((({expr} & 0xff) ^ 0x80) - 0x80)"
    if dtype == "int16":
        return f"((({expr} & 0xffff) ^ 0x8000) - 0x8000)"
    return expr


def _fmt(fmt: str):
    return lambda ctx, a, it, ot: fmt.format(*a, t=ot)


def _attr_fmt(fmt: str, **defaults):
    """A float expression with attributes as literals: ``fmt`` names them ({alpha}, ...) and the args {0}."""

    def build(ctx, a, it, ot):
        return fmt.format(*a, **{k: F(ctx.attr(k, v)) for k, v in defaults.items()})

    return build


def _sign(ctx, a, it, ot):
    if ot == "f32":
        return f"keep_nan({a[0]}, sign({a[0]}))"
    return f"select(0u, 1u, {a[0]} > 0u)" if ot == "u32" else f"sign({a[0]})"


def _is_inf(ctx, a, it, ot):
    x = a[0]
    inf = f"((bitcast<u32>({x}) & 0x7fffffffu) == 0x7f800000u)"
    pos, neg = ctx.attr("detect_positive", 1), ctx.attr("detect_negative", 1)
    if pos and neg:
        return inf
    if pos:
        return f"({inf} && {x} > 0.0)"
    if neg:
        return f"({inf} && {x} < 0.0)"
    return "false"


def _mod(ctx, a, it, ot):
    if ot == "f32":
        return f"fmod_f({a[0]}, {a[1]})"
    if ot == "u32":
        return f"mod_u({a[0]}, {a[1]})"
    return f"{'fmod_i' if ctx.attr('fmod', 0) else 'mod_i'}({a[0]}, {a[1]})"


def _bitshift(ctx, a, it, ot):
    op = "<<" if ctx.attr("direction") == "LEFT" else ">>"
    return f"select(0u, {a[0]} {op} {a[1]}, {a[1]} < 32u)"


def _shrink(ctx, a, it, ot):
    x, lam, bias = a[0], float(ctx.attr("lambd", 0.5)), float(ctx.attr("bias", 0.0))
    if ot != "f32":
        lam_s, bias_s = f"{ot}({F(lam)})", f"{ot}({F(bias)})"
        return f"select(select({ot}(0), {x} + {bias_s}, f32({x}) < {F(-lam)}), {x} - {bias_s}, f32({x}) > {F(lam)})"
    lam_s, bias_s = F(lam), F(bias)
    return f"select(select(0.0, {x} + {bias_s}, {x} < -{lam_s}), {x} - {bias_s}, {x} > {lam_s})"


def _prelu(ctx, a, it, ot):
    return f"select({a[1]} * {a[0]}, {a[0]}, {a[0]} >= {ot}(0))"


def _bitwise_not(ctx, a, it, ot):
    return f"(~{a[0]})"


SELU_ALPHA, SELU_GAMMA = 1.67326319217681884765625, 1.05070102214813232421875

OPS = {
    **{op: (_fmt(f"{fn}({{0}})"), "same") for op, fn in [
        ("Sin", "sin_f"), ("Cos", "cos_f"), ("Tan", "tan_f"), ("Asin", "asin_f"), ("Acos", "acos_f"), ("Atan", "atan_f"),
        ("Sinh", "sinh"), ("Cosh", "cosh"), ("Asinh", "asinh"), ("Acosh", "acosh"), ("Atanh", "atanh"),
        ("Floor", "floor"), ("Ceil", "ceil"), ("Round", "round")]},
    "Sign": (_sign, "same"),
    "Softplus": (_fmt("softplus_f({0})"), "same"),
    "Softsign": (_fmt("({0} / (1.0 + abs({0})))"), "same"),
    "Mish": (_fmt("({0} * tanh_f(softplus_f({0})))"), "same"),
    "Elu": (_attr_fmt("select({alpha} * (exp({0}) - 1.0), {0}, {0} >= 0.0)", alpha=1.0), "same"),
    "Celu": (_attr_fmt("(max_nan({0}, 0.0) + min(0.0, {alpha} * (exp({0} / {alpha}) - 1.0)))", alpha=1.0), "same"),
    "Selu": (_attr_fmt("({gamma} * select({alpha} * exp({0}) - {alpha}, {0}, {0} > 0.0))",
                       alpha=SELU_ALPHA, gamma=SELU_GAMMA), "same"),
    "ThresholdedRelu": (_attr_fmt("select(0.0, {0}, {0} > {alpha})", alpha=1.0), "same"),
    "Swish": (_attr_fmt("({0} * sigmoid_f({alpha} * {0}))", alpha=1.0), "same"),
    "Shrink": (_shrink, "same"),
    "PRelu": (_prelu, "same"),
    "IsNaN": (_fmt("is_nan({0})"), "bool"),
    "IsInf": (_is_inf, "bool"),
    "Mod": (_mod, "same"),
    "BitShift": (_bitshift, "same"),
    "BitwiseAnd": (_fmt("({0} & {1})"), "same"),
    "BitwiseOr": (_fmt("({0} | {1})"), "same"),
    "BitwiseXor": (_fmt("({0} ^ {1})"), "same"),
    "BitwiseNot": (_bitwise_not, "same"),
}
