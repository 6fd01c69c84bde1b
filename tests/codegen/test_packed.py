"""Packed types (bfloat16, float8, float4e2m1, int4/uint4, int2/uint2) against onnx.reference / ml_dtypes.

Encoding is checked on every code's value, every tie between neighbours (round half to even), one f32 ulp
either side of each tie, beyond the largest value, the specials and random values; decoding on every code.
"""

import ml_dtypes
import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator
from oprefs import check_node, make_model

from webinfer.backend import WebinferRep

rng = np.random.default_rng(0)
FLOATS = [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2,
          ml_dtypes.float8_e5m2fnuz, ml_dtypes.float4_e2m1fn]
INTS = [ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2]


def all_codes(dt) -> np.ndarray:
    n_bits = 16 if np.dtype(dt).itemsize == 2 else 4 if "float4" in np.dtype(dt).name else 8
    return np.arange(1 << n_bits, dtype=np.uint16 if n_bits == 16 else np.uint8).view(dt)


def probe_values(dt) -> np.ndarray:
    """f32 values that exercise an encoder's rounding and overflow."""
    vals = np.unique(all_codes(dt).astype(np.float32))
    vals = vals[np.isfinite(vals)]
    mids = (vals[:-1].astype(np.float64) + vals[1:]) / 2
    mids = mids[mids == mids.astype(np.float32)].astype(np.float32)  # exact ties only
    near = np.concatenate([np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(-np.inf))])
    top = np.float32(np.abs(vals).max())
    extra = np.array([top * 1.03, top * 1.5, min(top * 1e4, 3e38), 3e38, np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-40, -1e-39],
                     np.float32)
    rand = (rng.standard_normal(2000) * np.exp(rng.uniform(-12, 12, 2000))).astype(np.float32)
    out = np.concatenate([vals, mids, near, extra, -extra, rand]).astype(np.float32)
    return out if len(out) < 200_000 else out[rng.choice(len(out), 200_000, replace=False)]


def bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint8)


def run_both(model, feeds):
    return ReferenceEvaluator(model).run(None, feeds), WebinferRep(model).run(feeds)


def cast_model(x: np.ndarray, to, opset: int = 21, **attrs):
    node = helper.make_node("Cast", ["x"], ["y"], to=helper.np_dtype_to_tensor_dtype(np.dtype(to)), **attrs)
    return make_model([node], {"x": x}, ["y"], opset=opset)


# saturate applies to the float8 formats only: bfloat16 is checked once
@pytest.mark.parametrize("dt,saturate", [(dt, sat) for dt in FLOATS for sat in (1, 0)
                                         if sat or dt is not ml_dtypes.bfloat16],
                         ids=lambda v: np.dtype(v).name if not isinstance(v, int) else str(v))
def test_encode_float(dt, saturate):
    x = probe_values(dt)
    (ref,), (got,) = run_both(cast_model(x, dt, saturate=saturate), {"x": x})
    assert got.dtype == ref.dtype
    nan = np.isnan(ref.astype(np.float32))
    assert np.array_equal(np.isnan(got.astype(np.float32)), nan)
    bad = np.flatnonzero((bits(got) != bits(ref)) & ~nan)
    assert not len(bad), f"{len(bad)} codes differ, e.g. x={x[bad[:4]]} -> {bits(got)[bad[:4]]}, want {bits(ref)[bad[:4]]}"


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: np.dtype(d).name)
def test_decode_float(dt):
    codes = all_codes(dt)
    for to in (np.float32, np.float16):
        (ref,), (got,) = run_both(cast_model(codes, to), {"x": codes})
        np.testing.assert_array_equal(got, ref)  # NaNs equal, ±0 equal


@pytest.mark.parametrize("round_mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [1, 0])
def test_float8e8m0(round_mode, saturate):
    x = np.concatenate([rng.integers(0, 2**32, 5000, dtype=np.uint64).astype(np.uint32).view(np.float32),
                        np.array([0, 1, 0.75, 1.5, 2**127, 1.9 * 2**127, 3e38, np.inf, np.nan, 2**-127], np.float32)])
    (ref,), (got,) = run_both(cast_model(x, ml_dtypes.float8_e8m0fnu, opset=25, saturate=saturate,
                                         round_mode=round_mode), {"x": x})
    np.testing.assert_array_equal(bits(got), bits(ref))
    codes = all_codes(ml_dtypes.float8_e8m0fnu)
    (ref,), (got,) = run_both(cast_model(codes, np.float32, opset=25), {"x": codes})
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-37)  # 2^-127 is an f32 subnormal a GPU may flush


@pytest.mark.parametrize("dt", INTS, ids=lambda d: np.dtype(d).name)
def test_int_casts(dt):
    """Float and int32 -> 4/2-bit truncate and wrap like numpy; back to float32/int8 sign-extends."""
    x = np.concatenate([np.arange(-20, 21), [0.5, -0.5, 1.7, -1.7, 7.9, -8.9]]).astype(np.float32)
    check_node("Cast", {"x": x}, to=helper.np_dtype_to_tensor_dtype(np.dtype(dt)), opset=25)
    check_node("Cast", {"x": np.arange(-40, 41, dtype=np.int32)}, to=helper.np_dtype_to_tensor_dtype(np.dtype(dt)),
               opset=25)
    info = ml_dtypes.iinfo(dt)
    codes = np.arange(info.min, info.max + 1).astype(dt)
    codes = np.tile(codes, 9)[:37]  # an element count that is not a whole number of words
    for to in (np.float32, np.int8):
        check_node("Cast", {"x": codes}, to=helper.np_dtype_to_tensor_dtype(np.dtype(to)), opset=25)


@pytest.mark.parametrize("dt", [ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2])
def test_quantize_blocked_packed_ints(dt):
    info = ml_dtypes.iinfo(dt)
    x = rng.uniform(-12, 12, size=(5, 13)).astype(np.float32)
    s = rng.uniform(0.3, 2, size=(5, 4)).astype(np.float32)
    zp = rng.integers(info.min, info.max + 1, size=(5, 4)).astype(dt)
    check_node("QuantizeLinear", {"x": x, "s": s, "zp": zp}, opset=21, axis=1, block_size=4)
    q = rng.integers(info.min, info.max + 1, size=(13, 5)).astype(dt)
    sb = rng.uniform(0.1, 1, size=(4, 5)).astype(np.float32)
    zb = rng.integers(info.min, info.max + 1, size=(4, 5)).astype(dt)
    check_node("DequantizeLinear", {"q": q, "s": sb, "zp": zb}, opset=21, axis=0, block_size=4)


@pytest.mark.parametrize("dt", [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2fnuz])
def test_quantize_float8(dt):
    x = np.concatenate([rng.uniform(-600, 600, 40), [1e9, -1e9, np.nan]]).astype(np.float32)
    for saturate in (1, 0):
        check_node("QuantizeLinear", {"x": x, "s": np.float32(0.75)}, opset=21, saturate=saturate,
                   output_dtype=helper.np_dtype_to_tensor_dtype(np.dtype(dt)))
    q = all_codes(dt)
    check_node("DequantizeLinear", {"q": q, "s": np.float32(0.5)}, opset=21)


def test_kernel_indexing_buffers_itself_gets_widened():
    """MatMul indexes its inputs directly (vec4 loads): bfloat16 operands are unpacked into f32 temporaries
    and the result packed; compare with numpy's f32 product of the same bfloat16 values, rounded."""
    a = rng.standard_normal((6, 9)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((9, 8)).astype(ml_dtypes.bfloat16)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"], opset=21)
    rep = WebinferRep(model)
    (got,) = rep.run({"a": a, "b": b})
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(ml_dtypes.bfloat16)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=8e-3, atol=1e-6)


@pytest.mark.parametrize("src,dst", [(np.float32, np.int32), (np.int32, np.float32), (np.uint32, np.int32),
                                     (np.int8, np.uint8), (np.uint16, np.int16), (np.float16, np.int16),
                                     (ml_dtypes.bfloat16, np.uint16), (np.int16, ml_dtypes.bfloat16),
                                     (ml_dtypes.float8_e4m3fn, np.uint8), (np.uint8, ml_dtypes.float8_e5m2),
                                     (ml_dtypes.int4, ml_dtypes.uint4), (np.bool_, np.uint8)],
                         ids=lambda d: np.dtype(d).name)
def test_bitcast(src, dst):
    raw = rng.integers(0, 256, size=(3, 7 * np.dtype(src).itemsize), dtype=np.uint8)
    x = raw.view(src) if np.dtype(src).itemsize > 1 else raw.astype(np.uint8).view(src)
    if src in (ml_dtypes.int4, np.bool_):
        x = (raw % (16 if src is ml_dtypes.int4 else 2)).astype(np.int8).astype(src)
    # NaN payloads are not kept (a float8/bfloat16 NaN is decoded to an f32 NaN and re-encoded canonically)
    if np.dtype(src).kind == "f" or "float" in np.dtype(src).name:
        x = np.where(np.isnan(x.astype(np.float32)), np.zeros_like(x), x)
    if (np.dtype(dst).kind == "f" or "float" in np.dtype(dst).name) and np.dtype(src).itemsize == np.dtype(dst).itemsize:
        x = np.where(np.isnan(x.view(dst).astype(np.float32)), np.zeros_like(x), x)
    node = helper.make_node("BitCast", ["x"], ["y"], to=helper.np_dtype_to_tensor_dtype(np.dtype(dst)))
    (ref,), (got,) = run_both(make_model([node], {"x": x}, ["y"], opset=26), {"x": x})
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8))
