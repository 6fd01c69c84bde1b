"""Packed low-precision types in WGSL: decode a stored code to the compute type, encode a value to a code.

Storage is described in ``dtypes`` (``bits`` < 32: several codes per u32 word). Here are the bit
manipulations kernels use, as WGSL functions generated from a small table of formats, so every float8 /
float4 variant is one parametrised algorithm rather than a copied shader:

- decode: sign, exponent and mantissa fields are re-biased into an f32 (subnormals as ``m * 2^(1-bias-M)``),
  with each format's NaN / infinity codes;
- encode: round to nearest, ties to even, on the f32 bits (integer arithmetic, so no flush-to-zero on the
  way), then the format's overflow rule: infinity (e5m2), NaN (e4m3fn, the fnuz formats) or the largest
  finite value (float4e2m1, which has neither). This is ml_dtypes' ``astype``, which ONNX's reference uses;
  ``saturate`` (Cast, QuantizeLinear) clamps to the largest finite value first.
- bfloat16 keeps the top 16 bits of an f32 (rounded to nearest even); float8e8m0 is a biased exponent with
  ONNX's ``round_mode`` (up / down / nearest).

``emit.render`` appends the definition of every ``dec_*``/``enc_*``/``sat_*`` function a shader calls.
Kernels that index their buffers themselves get packed operands unpacked first (``dispatch_widened``), and
folding never widens a packed constant into the artifact (``widens_packed``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..dtypes import DTYPES, gpu_nbytes, wide_dtype
from ..dtypes import dtype as get_dtype

if TYPE_CHECKING:
    from .program import Tensor


def F(v: float) -> str:
    """An f32 literal for a finite constant of a format (powers of two and the formats' largest values)."""
    return f"{float(np.float32(v))!r}f"


NAN = "bitcast<f32>(0x7fc00000u)"
INF = "bitcast<f32>(0x7f800000u)"


@dataclass(frozen=True)
class MiniFloat:
    """A sign + E exponent bits + M mantissa bits format. ``kind``: 'fn' (all-ones is NaN, no infinity),
    'fnuz' (0x80 is the only NaN, no negative zero, no infinity), 'ieee' (infinities and NaNs),
    'satfinite' (no infinity or NaN: overflow saturates; NaN becomes a zero of the opposite sign, as in
    ml_dtypes)."""

    tag: str
    E: int
    M: int
    bias: int
    kind: str

    @property
    def nbits(self) -> int:
        return 1 + self.E + self.M

    @property
    def max_code(self) -> int:
        """The largest finite magnitude's code."""
        all_ones = (1 << (self.E + self.M)) - 1
        if self.kind == "fn":
            return all_ones - 1
        if self.kind == "ieee":
            return all_ones - (1 << self.M)  # an all-ones exponent is infinity or NaN
        return all_ones

    @property
    def max_value(self) -> float:
        e, m = self.max_code >> self.M, self.max_code & ((1 << self.M) - 1)
        return (1 + m / (1 << self.M)) * 2.0 ** (e - self.bias)


MINIFLOATS = {
    "float8_e4m3fn": MiniFloat("f8e4m3fn", 4, 3, 7, "fn"),
    "float8_e4m3fnuz": MiniFloat("f8e4m3fnuz", 4, 3, 8, "fnuz"),
    "float8_e5m2": MiniFloat("f8e5m2", 5, 2, 15, "ieee"),
    "float8_e5m2fnuz": MiniFloat("f8e5m2fnuz", 5, 2, 16, "fnuz"),
    "float4_e2m1fn": MiniFloat("f4e2m1", 2, 1, 1, "satfinite"),
}
# float16 is stored as f32, but Cast rounds to it with the same encoder: WGSL's quantizeToF16 may flush
# f16 subnormals to zero (lavapipe does), the integer path does not.
FLOAT16 = MiniFloat("f16", 5, 10, 15, "ieee")
_TAGS = {f.tag: f for f in [*MINIFLOATS.values(), FLOAT16]}
_SIGNED_INT_BITS = {"int8": 8, "int4": 4, "int2": 2}


# -- expressions used by the prelude's accessors and by Cast ---------------------------------------------
def decode_expr(dtype: str, code: str) -> str:
    """WGSL turning a masked code (u32) of a packed ``dtype`` into its compute-type value."""
    d = get_dtype(dtype)
    if dtype in MINIFLOATS:
        return f"dec_{MINIFLOATS[dtype].tag}({code})"
    if dtype == "bfloat16":
        return f"bitcast<f32>({code} << 16u)"
    if dtype == "float8_e8m0fnu":
        return f"dec_f8e8m0({code})"
    if dtype in _SIGNED_INT_BITS:
        shift = 32 - d.bits
        return f"(bitcast<i32>({code} << {shift}u) >> {shift}u)"
    return code


def encode_expr(dtype: str, value: str, round_mode: str = "up", saturate: bool = False) -> str:
    """WGSL turning a compute-type value into the (unmasked) u32 code of a packed ``dtype``."""
    if dtype in MINIFLOATS:
        return f"enc_{MINIFLOATS[dtype].tag}({value})"
    if dtype == "bfloat16":
        return f"enc_bf16({value})"
    if dtype == "float8_e8m0fnu":
        mode = {"up": 0, "down": 1, "nearest": 2}[round_mode]
        return f"enc_f8e8m0({value}, {mode}u, {'true' if saturate else 'false'})"
    if get_dtype(dtype).compute == "i32":
        return f"bitcast<u32>({value})"
    return value


def saturate_expr(dtype: str, value: str) -> str:
    """Clamp a float to the largest finite value of a float8 format (NaN stays NaN): Cast's ``saturate``."""
    if dtype not in MINIFLOATS:
        return value
    return f"sat_{MINIFLOATS[dtype].tag}({value})"


def f16_round_expr(value: str) -> str:
    """An f32 rounded to the nearest float16 (ties to even, subnormals kept, overflow to infinity)."""
    return f"dec_f16(enc_f16({value}))"


def round_trip_expr(dtype: str, value: str, **kw) -> str:
    """The value a compute-type value becomes once stored as ``dtype`` (what Cast yields inside a kernel)."""
    d = get_dtype(dtype)
    mask = (1 << d.bits) - 1
    return decode_expr(dtype, f"({encode_expr(dtype, value, **kw)} & {mask}u)")


# -- the WGSL functions ------------------------------------------------------------------------------------
def _decode_minifloat(f: MiniFloat) -> str:
    em = f.E + f.M
    sub = F(2.0 ** (1 - f.bias - f.M))
    lines = [f"fn dec_{f.tag}(c: u32) -> f32 {{",
             f"  let e = (c >> {f.M}u) & {(1 << f.E) - 1}u;",
             f"  let m = c & {(1 << f.M) - 1}u;",
             f"  var v = bitcast<f32>(((e + {127 - f.bias}u) << 23u) | (m << {23 - f.M}u));",
             f"  if (e == 0u) {{ v = f32(m) * {sub}; }}"]
    if f.kind == "fn":
        lines.append(f"  if ((c & {(1 << em) - 1}u) == {(1 << em) - 1}u) {{ v = {NAN}; }}")
    elif f.kind == "fnuz":
        lines.append(f"  if (c == {1 << em}u) {{ v = {NAN}; }}")
    elif f.kind == "ieee":
        lines.append(f"  if (e == {(1 << f.E) - 1}u) {{ v = select({NAN}, {INF}, m == 0u); }}")
    lines += [f"  return select(v, -v, (c >> {em}u) == 1u);", "}"]
    return "\n".join(lines)


def _encode_minifloat(f: MiniFloat) -> str:
    em = f.E + f.M
    sign = f"(s << {em}u)"
    nan = {"fn": f"({sign} | {(1 << em) - 1}u)", "fnuz": f"{1 << em}u",
           "ieee": f"({sign} | {f.max_code + 1 + (1 << (f.M - 1))}u)", "satfinite": f"((s ^ 1u) << {em}u)"}[f.kind]
    overflow = {"fn": nan, "fnuz": nan, "ieee": f"({sign} | {f.max_code + 1}u)",
                "satfinite": f"({sign} | {f.max_code}u)"}[f.kind]
    zero = f"{sign}" if f.kind != "fnuz" else "0u"
    return "\n".join([
        f"fn enc_{f.tag}(x: f32) -> u32 {{",
        "  let b = bitcast<u32>(x);",
        "  let s = b >> 31u;",
        "  let a = b & 0x7fffffffu;",
        f"  if (a > 0x7f800000u) {{ return {nan}; }}",
        f"  if (a == 0x7f800000u) {{ return {overflow}; }}",
        f"  if (a < 0x00800000u) {{ return {zero}; }}",
        f"  let e = i32(a >> 23u) - {127 - f.bias};",
        "  let m = (a & 0x7fffffu) | 0x800000u;",
        f"  var shift = {23 - f.M}u;",
        "  var base = 0u;",
        f"  if (e >= 1) {{ base = u32(e - 1) << {f.M}u; }} else {{ shift = u32({24 - f.M} - e); }}",
        f"  if (shift > 25u) {{ return {zero}; }}",
        "  let q = m >> shift;",
        "  let rem = m & ((1u << shift) - 1u);",
        "  let half = 1u << (shift - 1u);",
        "  let code = base + q + select(0u, 1u, rem > half || (rem == half && (q & 1u) == 1u));",
        f"  if (code > {f.max_code}u) {{ return {overflow}; }}",
        f"  if (code == 0u) {{ return {zero}; }}",
        f"  return {sign} | code;",
        "}",
    ])


def _saturate_minifloat(f: MiniFloat) -> str:
    top = F(f.max_value)
    # NaN is tested on the bits: WGSL compilers may assume `x != x` is false
    return (f"fn sat_{f.tag}(x: f32) -> f32 {{\n"
            f"  return select(clamp(x, -{top}, {top}), x, (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u);\n}}")


_FIXED = {
    "enc_bf16": """fn enc_bf16(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) { return (b >> 16u) | 0x40u; }
  return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}""",
    "dec_f8e8m0": f"""fn dec_f8e8m0(c: u32) -> f32 {{
  if (c == 255u) {{ return {NAN}; }}
  if (c == 0u) {{ return bitcast<f32>(0x00400000u); }}
  return bitcast<f32>(c << 23u);
}}""",
    # ONNX's to_float8e8m0: the f32 exponent field, rounded up/down/to nearest by the dropped mantissa bits.
    "enc_f8e8m0": """fn enc_f8e8m0(x: f32, mode: u32, saturate: bool) -> u32 {
  let b = bitcast<u32>(x);
  let e = (b >> 23u) & 255u;
  if (e == 255u) { return 255u; }
  var up = false;
  if (mode == 0u) { up = (b & 0x7fffffu) != 0u; }
  if (mode == 2u) {
    up = (b & 0x400000u) != 0u && ((b & 0x200000u) != 0u || (b & 0x1fffffu) != 0u || e > 0u);
  }
  if (saturate && e == 254u) { up = false; }
  return select(e, e + 1u, up);
}""",
}


def _definition(name: str) -> str:
    if name in _FIXED:
        return _FIXED[name]
    kind, tag = name.split("_", 1)
    f = _TAGS[tag]
    return {"dec": _decode_minifloat, "enc": _encode_minifloat, "sat": _saturate_minifloat}[kind](f)


_CALL = re.compile(r"\b((?:dec|enc|sat)_(?:f8e4m3fnuz|f8e4m3fn|f8e5m2fnuz|f8e5m2|f4e2m1|f8e8m0|bf16|f16))\(")


def functions_for(wgsl: str) -> str:
    """Definitions of the codec functions ``wgsl`` calls (each once)."""
    names = sorted(set(_CALL.findall(wgsl)))
    names = [n for n in names if f"fn {n}(" not in wgsl]
    return "".join("\n" + _definition(n) + "\n" for n in names)


# -- build time: packed tensors around kernels and constants ---------------------------------------------
WIDEN_MIN_BYTES = 1 << 16  # a folded result this small may widen a packed constant


def dispatch_widened(lowerer, template: str, reads: dict, writes: dict, **kw) -> None:
    """A kernel that indexes its buffers itself (not through the prelude's accessors) gets packed tensors
    (bfloat16, float8, int4...) unpacked into 32-bit temporaries first and its packed outputs packed
    after; an output is unpacked before too, since a kernel may write only part of it (scatter)."""
    def wide(t: Tensor) -> Tensor:
        return lowerer.program.new_tensor(wide_dtype(t.dtype), t.shape) if get_dtype(t.dtype).packed else t

    def convert(src: Tensor, dst: Tensor) -> None:
        lowerer.dispatch("elementwise.wgsl.j2", {"x0": src}, {"out": dst}, work=dst.numel, grid=None,
                         params={"n": dst.numel}, wg=256, label=f"convert:{kw['label']}", node=kw["node"],
                         tctx={"arity": 1, "rank": dst.rank, "contiguous": True, "scalar": [False],
                               "expr": "v0", "helpers": [], "in_types": [get_dtype(src.dtype).compute]})

    wide_reads = {k: wide(t) for k, t in reads.items()}
    wide_writes = {k: wide(t) for k, t in writes.items()}
    for k, t in list(reads.items()) + list(writes.items()):
        target = wide_reads.get(k) if k in reads else wide_writes[k]
        if target is not t:
            convert(t, target)
    lowerer.dispatch(template, wide_reads, wide_writes, **kw)
    for k, t in writes.items():
        if wide_writes[k] is not t:
            convert(wide_writes[k], t)


def widens_packed(inputs: list[Tensor], outputs: list[np.ndarray]) -> bool:
    """Whether folding would turn a packed constant (int4, float8... weights) into a much larger one: a
    DequantizeLinear of a 4-bit weight would put 8x its bytes into the artifact."""
    packed = sum(gpu_nbytes(t.dtype, t.value.size) for t in inputs if get_dtype(t.dtype).packed)
    if not packed:
        return False
    out = sum(gpu_nbytes(str(v.dtype), v.size) if str(v.dtype) in DTYPES else v.nbytes for v in outputs)
    return out > 2 * packed and out > WIDEN_MIN_BYTES


def pack(value: np.ndarray) -> bytes:
    """A packed-type constant (numpy/ml_dtypes, one code per byte or bfloat16 per 2 bytes) as GPU words."""
    d = DTYPES[str(value.dtype)]
    flat = np.ascontiguousarray(value).reshape(-1)
    codes = flat.view(np.uint16 if d.host_size == 2 else np.uint8).astype(np.uint32) & ((1 << d.bits) - 1)
    per = d.per_word
    codes = np.concatenate([codes, np.zeros((-len(codes)) % per, np.uint32)]).reshape(-1, per)
    words = np.zeros(len(codes), np.uint32)
    for j in range(per):
        words |= codes[:, j] << np.uint32(j * d.bits)
    return words.tobytes()
