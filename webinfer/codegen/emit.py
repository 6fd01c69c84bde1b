"""Render WGSL from the jinja2 templates, and prove each shader valid before it enters an artifact.

A template sees only what we generate: binding variables named by the lowering (``a``, ``b``, ``out``),
params as literals or uniform fields, and numbers. Nothing the model names reaches WGSL text.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass

import jinja2
import numpy as np

from ..dims import Dim
from ..dtypes import dtype as get_dtype
from ..errors import WebinferError
from . import packed

_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(os.path.join(os.path.dirname(__file__), "..", "shaders")),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)

def wgsl_literal(value, wgsl_type: str) -> str:
    """A WGSL literal for a number we computed (attributes are numbers, never pasted strings)."""
    if wgsl_type == "f32":
        v = float(np.float32(value))
        if math.isnan(v):
            return "bitcast<f32>(0x7fc00000u)"
        if math.isinf(v):
            return "bitcast<f32>(0x7f800000u)" if v > 0 else "bitcast<f32>(0xff800000u)"
        return f"{v!r}f"
    v = int(value)
    if wgsl_type == "u32":
        if not 0 <= v < 2**32:
            raise WebinferError(f"value {v} does not fit u32")
        return f"{v}u"
    if wgsl_type == "i32":
        if not -(2**31) <= v < 2**31:
            raise WebinferError(f"value {v} does not fit i32 (int64 values live as i32 on the GPU)")
        return f"{v}i" if v != -(2**31) else "i32(-2147483647i - 1i)"
    if wgsl_type == "bool":
        return "true" if v else "false"
    raise ValueError(wgsl_type)


_WG_VAR = re.compile(r"var<workgroup>\s*\w+\s*:\s*array<\s*(\w+(?:<\w+>)?)\s*,\s*(\d+)u?\s*>")
_SIZES = {"f32": 4, "i32": 4, "u32": 4, "f16": 2, "vec2f": 8, "vec4f": 16, "vec4<f32>": 16, "vec4<i32>": 16,
          "vec4<u32>": 16, "vec4<f16>": 8, "vec2<f16>": 4}


def workgroup_bytes(wgsl: str) -> int:
    """Workgroup memory a shader declares (arrays of scalars/vectors; checked against the target's limit)."""
    return sum(_SIZES.get(t, 16) * int(n) for t, n in _WG_VAR.findall(wgsl))


@dataclass
class Binding:
    var: str
    storage: str
    compute: str
    write: bool
    bits: int = 32  # < 32: packed codes (dtypes.py); the accessors decode/encode them
    dec: str = ""  # WGSL decoding the masked code `c` to the compute type
    enc: str = ""  # WGSL encoding the compute value `v` to a code

    @property
    def per(self) -> int:
        return 32 // self.bits

    @property
    def mask(self) -> int:
        return (1 << self.bits) - 1


def binding(var: str, dtype: str, write: bool) -> Binding:
    d = get_dtype(dtype)
    if not d.packed:
        return Binding(var, d.storage, d.compute, write)
    # stores keep a value that is already in the type (Cast rounded it): float8e8m0 rounds "down" (exact)
    return Binding(var, d.storage, d.compute, write, d.bits, packed.decode_expr(dtype, "c"),
                   packed.encode_expr(dtype, "v", round_mode="down"))


def code(value, wgsl_type: str = "u32") -> tuple:
    """A param whose value changes the code (a loop the compiler should unroll, a vector width): written into
    the shader as a literal, where ordinary sizes go to the uniform buffer."""
    return (wgsl_type, value, "code")


def offset(value, wgsl_type: str = "i32") -> tuple:
    """A param that stays a uniform even when it is 0 (a zero literal would delete code): an offset that is 0
    for the first of several otherwise identical dispatches (Concat's parts) keeps them one shader."""
    return (wgsl_type, value, "uniform")


def as_literal(value, typ: str, how: str | None) -> bool:
    """The specialization policy: which static params are written into the shader.

    Sizes and strides are uniforms by default, so one family's kernels share one pipeline across shapes
    (onnxruntime's WebGPU EP does the same; only its cache hints specialize). Literals: params the lowering
    marks with :func:`code`, zeros (a zero stride deletes an index term: the broadcast pattern is code),
    floats and bools (attribute constants; bools cannot live in a uniform buffer)."""
    if how == "uniform" or not isinstance(value, (int, float, np.integer, np.floating, bool)):
        return False  # symbolic, or asked for: a uniform
    return how == "code" or typ not in ("u32", "i32") or isinstance(value, bool) or int(value) == 0


def render(template: str, reads: dict, writes: dict, params: dict, wg: int, **ctx) -> tuple[str, list]:
    """Render a kernel. ``params`` maps name -> (wgsl type, value[, "code"]); :func:`as_literal` decides which
    become literals, the rest uniform fields. Returns the WGSL and the uniforms [(name, type, dim)]."""
    bindings = [binding(v, t.dtype, False) for v, t in reads.items()]
    bindings += [binding(v, t.dtype, True) for v, t in writes.items()]
    p: dict[str, str] = {}
    uniforms: list[tuple[str, str, Dim]] = []
    for name, (typ, value, *how) in params.items():
        if as_literal(value, typ, how[0] if how else None):
            p[name] = wgsl_literal(value, typ)
        else:
            p[name] = f"params.{name}"
            uniforms.append((name, typ, int(value) if isinstance(value, np.integer) else value))
    wgsl = _ENV.get_template(template).render(
        bindings=bindings, uniforms=uniforms, p=p, wg=wg, lit=wgsl_literal, **ctx
    )
    return route_float_bits(wgsl + packed.functions_for(wgsl)), uniforms


def indexes_packed_directly(wgsl: str, reads: dict, writes: dict, vec4_vars=()) -> bool:
    """Whether a shader reads or writes a packed binding other than through the prelude's accessors (which
    index it once to load, or three times when it is written: atomicLoad, atomicAnd, atomicOr)."""
    for var, t in list(reads.items()) + list(writes.items()):
        if not get_dtype(t.dtype).packed:
            continue
        if var in vec4_vars or len(re.findall(rf"\b{var}\[", wgsl)) != (3 if var in writes else 1):
            return True
    return False


_FLOAT_BITS = re.compile(r"bitcast<f32>\((0x[0-9a-fA-F]+u)\)")


def route_float_bits(wgsl: str) -> str:
    """Dawn's compiler (Tint) const-evaluates ``bitcast<f32>(0x7f800000u)`` and rejects the infinity or
    NaN it yields, while naga accepts it; a call to a function is not a const-expression, so route every
    such bit pattern through one. All uses are inside functions (initial values, selects)."""
    if not _FLOAT_BITS.search(wgsl):
        return wgsl
    return _FLOAT_BITS.sub(r"wi_f32_bits(\1)", wgsl) + "\nfn wi_f32_bits(u: u32) -> f32 { return bitcast<f32>(u); }\n"


class ShaderValidator:
    """Compiles WGSL with wgpu's shader compiler (naga); one device per build."""

    def __init__(self):
        self._device = None
        self._seen: set[str] = set()

    def validate(self, wgsl: str, label: str) -> None:
        if wgsl in self._seen:
            return
        from ..runtime.native import naga_wgsl, request_device

        if self._device is None:
            self._device = request_device()
        try:
            self._device.create_shader_module(code=naga_wgsl(wgsl))
        except Exception as e:  # wgpu raises GPUValidationError with naga's message
            lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
            first = next((ln for ln in lines if "error" in ln.lower() and ln != "Validation Error"),
                         lines[0] if lines else type(e).__name__)
            raise WebinferError(f"internal error: generated WGSL for {label} does not compile: {first}") from e
        self._seen.add(wgsl)
