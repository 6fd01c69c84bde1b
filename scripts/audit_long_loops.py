"""Audit: one-op models whose per-invocation loop trip counts pass 65,535 (lavapipe's silent stop), run natively
and compared with onnxruntime (numpy where onnxruntime lacks the op). Prints one line a case:
``pass`` / ``WRONG`` (max error, share of elements off) / ``refused`` (the build's one line) / ``error``.
Exit status 1 when a case is WRONG.

    PYTHONPATH=<tree> python scripts/audit_long_loops.py [-k substring] [--target software|gpu]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import onnxruntime as ort
from onnx import helper, numpy_helper

rng = np.random.default_rng(5)


def f32(*shape, scale=1.0, offset=0.0):
    return (rng.standard_normal(shape) * scale + offset).astype(np.float32)


def model(op, feeds, inits=None, n_out=1, opset=18, domain="", **attrs):
    names = list(feeds) + list(inits or {})
    outs = [f"y{i}" for i in range(n_out)]
    g = helper.make_graph(
        [helper.make_node(op, names, outs, domain=domain, **attrs)], "audit",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for n, v in feeds.items()],
        [helper.make_empty_tensor_value_info(o) for o in outs],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in (inits or {}).items()])
    ops = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(g, opset_imports=ops)


def i64(*v):
    return np.array(v, np.int64)


def _fft(feeds):
    """numpy's float64 FFT: onnxruntime's float32 DFT of 70 000 is itself up to ~15 off."""
    ex = np.fft.fft(feeds["x"][0, :, 0].astype(np.float64))
    return [np.stack([ex.real, ex.imag], -1)[None]]


# name: (what loops past the limit, builder returning (model, feeds))
CASES = {
    "CumSum 1x100000": ("scan over the row", lambda: _m("CumSum", {"x": f32(1, 100_000)}, {"a": i64(1)[0]})),
    "Softmax 4x70000": ("row statistics", lambda: _m("Softmax", {"x": f32(4, 70_000)}, axis=-1)),
    "LogSoftmax 4x70000": ("row statistics", lambda: _m("LogSoftmax", {"x": f32(4, 70_000)}, axis=-1)),
    "Hardmax 4x70000": ("row argmax", lambda: _m("Hardmax", {"x": f32(4, 70_000)}, axis=-1)),
    "LayerNorm 3x70000": ("row mean/var", lambda: _m("LayerNormalization", {"x": f32(3, 70_000)},
                                                      {"s": f32(70_000), "b": f32(70_000)}, axis=-1)),
    "ArgMax 4x70000": ("row argmax", lambda: _m("ArgMax", {"x": f32(4, 70_000)}, axis=1)),
    "ReduceSum axis0 70000x3": ("strided row", lambda: _m("ReduceSum", {"x": f32(70_000, 3)}, {"a": i64(0)})),
    "MVN 1x2x300x300": ("mean/var over 90000", lambda: _m("MeanVarianceNormalization", {"x": f32(1, 2, 300, 300)})),
    "GroupNorm 1x4x300x300 g2": ("group of 180000", lambda: _m(
        "GroupNormalization", {"x": f32(1, 4, 300, 300)}, {"s": f32(2), "b": f32(2)}, num_groups=2)),
    "MatMul 1x70000 @ 70000x3": ("K (gemv)", lambda: _m("MatMul", {"a": f32(1, 70_000), "b": f32(70_000, 3)})),
    "MatMul 8x70000 @ 70000x8": ("K (matmul)", lambda: _m("MatMul", {"a": f32(8, 70_000), "b": f32(70_000, 8)})),
    "MatMul weight 4x70000 @ 70000x4": ("K, constant B", lambda: _m("MatMul", {"a": f32(4, 70_000)},
                                                                    {"b": f32(70_000, 4)})),
    "Gemm 4x70000 transB": ("K", lambda: _m("Gemm", {"a": f32(4, 70_000), "b": f32(3, 70_000)}, transB=1)),
    "Einsum ij,ij->i j=70000": ("contraction", lambda: _m("Einsum", {"a": f32(3, 70_000), "b": f32(3, 70_000)},
                                                            equation="ij,ij->i")),
    "Conv 300ch 1x300 kernel": ("C_in*kh*kw = 90000", lambda: _m("Conv", {"x": f32(1, 300, 1, 300)},
                                                                 {"w": f32(2, 300, 1, 300, scale=0.01)})),
    "Conv 1ch 1x70000 kernel": ("kernel width", lambda: _m("Conv", {"x": f32(1, 1, 1, 70_010)},
                                                            {"w": f32(2, 1, 1, 70_000, scale=0.01)})),
    "ConvTranspose 70000ch": ("C_in", lambda: _m("ConvTranspose", {"x": f32(1, 70_000, 1, 2)},
                                                  {"w": f32(70_000, 2, 1, 1, scale=0.01)})),
    "AveragePool 1x70000": ("window", lambda: _m("AveragePool", {"x": f32(1, 2, 1, 70_000)},
                                                 kernel_shape=[1, 70_000])),
    "MaxPool 1x70000": ("window", lambda: _m("MaxPool", {"x": f32(1, 2, 1, 70_000)}, kernel_shape=[1, 70_000])),
    "LpPool 1x70000": ("window", lambda: _m("LpPool", {"x": f32(1, 2, 1, 70_000)}, kernel_shape=[1, 70_000])),
    "GlobalLpPool 300x300": ("window", lambda: _m("GlobalLpPool", {"x": f32(1, 2, 300, 300)})),
    "TopK 5 of 70000": ("ranking n", lambda: _m("TopK", {"x": f32(2, 70_000)}, {"k": i64(5)}, n_out=2)),
    "TopK 1 of 70000": ("selection k*n", lambda: _m("TopK", {"x": f32(2, 70_000)}, {"k": i64(1)}, n_out=2)),
    "ScatterND 70000 updates": ("updates per element", lambda: _m(
        "ScatterND", {"d": f32(70_000)}, {"i": rng.permutation(70_000).astype(np.int64)[:, None],
                                          "u": f32(70_000)})),
    "ScatterElements 70000": ("updates per element", lambda: _m(
        "ScatterElements", {"d": f32(1, 70_000)}, {"i": rng.permutation(70_000).astype(np.int64)[None],
                                                   "u": f32(1, 70_000)}, axis=1)),
    "ScatterND add 70000 updates, input indices": ("updates per element", lambda: _m(
        "ScatterND", {"d": f32(10), "i": rng.integers(0, 10, (70_000, 1)), "u": f32(70_000)}, reduction="add")),
    "ScatterElements add 70000, input indices": ("updates per element", lambda: _m(
        "ScatterElements", {"d": f32(1, 10), "i": rng.integers(0, 10, (1, 70_000)), "u": f32(1, 70_000)},
        axis=1, reduction="add")),
    "GatherElements 70000": ("none", lambda: _m("GatherElements", {"d": f32(1, 70_000)},
                                                {"i": rng.integers(0, 70_000, (1, 70_000))}, axis=1)),
    "NonZero 1M": ("count scan", lambda: _m("NonZero", {"x": (rng.random(1_000_000) > 0.5).astype(np.float32)})),
    "Compress 200000": ("count scan", lambda: _m("Compress", {"x": f32(200_000)},
                                                 {"c": rng.random(200_000) > 0.3}, axis=0)),
    "Unique 70000": ("sort/dedup", lambda: _m("Unique", {"x": rng.integers(0, 90_000, 70_000).astype(np.float32)},
                                              n_out=4, sorted=1)),
    "DFT 70000": ("sum over n", lambda: _m("DFT", {"x": f32(1, 70_000, 1)}, {"len": i64(70_000)[0],
                                                                             "ax": i64(1)[0]}, opset=20), _fft),
    "Det 48x48": ("n^3 LU", lambda: _m("Det", {"x": f32(2, 48, 48)})),
    "Det 64x64": ("n^3 LU", lambda: _m("Det", {"x": f32(2, 64, 64)})),
    "LSTM T=20000 H=4": ("sequence x hidden", lambda: _m(
        "LSTM", {"x": f32(20_000, 1, 2, scale=0.1)}, {"w": f32(1, 16, 2, scale=0.3), "r": f32(1, 16, 4, scale=0.3)},
        n_out=1, hidden_size=4)),
    "GRU input size 70000": ("input size", lambda: _m(
        "GRU", {"x": f32(2, 1, 70_000, scale=0.01)}, {"w": f32(1, 6, 70_000, scale=0.01),
                                                      "r": f32(1, 6, 2, scale=0.3)}, n_out=1, hidden_size=2)),
    "SoftmaxCrossEntropy 4x70000": ("classes", lambda: _m(
        "SoftmaxCrossEntropyLoss", {"x": f32(4, 70_000)}, {"t": rng.integers(0, 70_000, 4)})),
    "NLLLoss mean 70000": ("batch mean", lambda: _m(
        "NegativeLogLikelihoodLoss", {"x": f32(70_000, 3)}, {"t": rng.integers(0, 3, 70_000)})),
    "DynamicQuantizeLinear 200000": ("global min/max", lambda: _m("DynamicQuantizeLinear", {"x": f32(200_000)},
                                                                 n_out=3)),
    "MatMulInteger K=70000": ("K", lambda: _m("MatMulInteger", {
        "a": rng.integers(0, 255, (2, 70_000)).astype(np.uint8), "b": rng.integers(0, 255, (70_000, 2)).astype(np.uint8)})),
    "Attention kv=70000 (com.microsoft MHA)": ("past length", lambda: _m(
        "MultiHeadAttention", {"q": f32(1, 1, 8), "k": f32(1, 70_000, 8), "v": f32(1, 70_000, 8)},
        domain="com.microsoft", num_heads=1)),
    "Attention opset23 kv=70000": ("past length", lambda: _m(
        "Attention", {"q": f32(1, 1, 1, 8), "k": f32(1, 1, 70_000, 8), "v": f32(1, 1, 70_000, 8)}, opset=23)),
}


def _m(op, feeds, inits=None, n_out=1, opset=18, domain="", **attrs):
    return model(op, feeds, inits, n_out, opset, domain, **attrs), feeds


def run_case(name, target):
    from webinfer.backend import WebinferRep

    m, feeds = CASES[name][1]()
    if len(CASES[name]) > 2:  # an exact reference where onnxruntime's own float32 error is too large
        want = CASES[name][2](feeds)
    else:
        want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    try:
        got = WebinferRep(m, target=target).run(feeds)
    except Exception as e:  # noqa: BLE001 - the audit reports every failure as a line
        msg = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        kind = "refused" if "Unsupported" in type(e).__name__ else "error"
        return kind, msg[:150]
    worst = ""
    for w, g in zip(want, got):
        w, g = np.asarray(w), np.asarray(g)
        if w.shape != g.shape:
            return "WRONG", f"shape {g.shape} != {w.shape}"
        w64, g64 = w.astype(np.float64), g.astype(np.float64)
        # float32 sums of ~1e5 terms: 1e-3 relative, plus 2e-5 of the output's peak for values near 0
        tol = 1e-3 + 1e-3 * np.abs(w64) + 2e-5 * float(np.nanmax(np.abs(w64), initial=0))
        off = ~(np.abs(g64 - w64) <= tol) & ~(np.isnan(w64) & np.isnan(g64))
        if off.any():
            worst = f"{off.mean():.1%} of {w.size} off, max err {np.nanmax(np.abs(g64 - w64)):.3g}"
            return "WRONG", worst
    return "pass", ""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", default="")
    ap.add_argument("--target", default="software")
    args = ap.parse_args()
    bad = 0
    for name, (what, *_) in CASES.items():
        if args.k.lower() not in name.lower():
            continue
        t0 = time.time()
        try:
            kind, detail = run_case(name, args.target)
        except Exception as e:  # noqa: BLE001 - onnxruntime rejecting the case
            kind, detail = "skip", f"reference: {str(e).splitlines()[0][:120]}"
        bad += kind == "WRONG"
        print(f"{kind:8} {name:40} [{what}] {detail} ({time.time() - t0:.1f}s)", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
