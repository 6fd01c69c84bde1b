"""Kernels whose one invocation would loop 65535 times or more (lavapipe stops there, silently: every element
of a MatMul with K = 66000 came out wrong) are refused at build, in one line, until they get a split form
(codegen/kernels/loop_limit.py; scripts/audit_long_loops.py runs the whole audit). GlobalLpPool got one: the
reductions' row kernel, against onnxruntime past the limit."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from scripts.audit_long_loops import f32, i64, model
from webinfer.backend import WebinferRep
from webinfer.cli import main
from webinfer.errors import UnsupportedOpError

rng = np.random.default_rng(3)

# what loops past the limit in one invocation (as the line names it) -> (op, feeds, initializers, opset, attrs);
# Einsum "ij,ij->i" is a batched matmul of K = 70000
REFUSED = {
    "K": ("Gemm", {"a": f32(4, 70_000), "b": f32(3, 70_000)}, {}, 18, {"transB": 1}),
    "K = 65537": ("MatMul", {"a": f32(1, 65_537), "b": f32(65_537, 3)}, {}, 18, {}),  # prime: no even split
    "input channels and window": ("Conv", {"x": f32(1, 300, 1, 300)}, {"w": f32(2, 300, 1, 300)}, 18, {}),
    "K ": ("Einsum", {"a": f32(3, 70_000), "b": f32(3, 70_000)}, {}, 18, {"equation": "ij,ij->i"}),
    "pooling window": ("MaxPool", {"x": f32(1, 2, 1, 70_010)}, {}, 18, {"kernel_shape": [1, 70_000]}),
    "items to compare": ("Unique", {"x": f32(70_000)}, {}, 18, {}),
    "input size": ("GRU", {"x": f32(2, 1, 70_000)}, {"w": f32(1, 6, 70_000), "r": f32(1, 6, 2)}, 18,
                   {"hidden_size": 2}),
    "attended length": ("Attention", {"q": f32(1, 1, 1, 8), "k": f32(1, 1, 70_000, 8), "v": f32(1, 1, 70_000, 8)},
                        {}, 23, {}),
}


@pytest.mark.parametrize("what", list(REFUSED))
def test_past_the_loop_limit_is_refused(what):
    op, feeds, inits, opset, attrs = REFUSED[what]
    m = model(op, feeds, inits, 1, opset, **attrs)
    with pytest.raises(UnsupportedOpError, match=f"{what}.*65535"):
        WebinferRep(m, target="software").run(feeds)


def test_refusal_is_one_line_from_the_cli(tmp_path, capsys):
    op, feeds, inits, opset, attrs = REFUSED["K"]
    path = tmp_path / "m.onnx"
    path.write_bytes(model(op, feeds, inits, 1, opset, **attrs).SerializeToString())
    rc = main(["build", str(path), "-o", str(tmp_path / "out"), "--target", "software"])
    err = capsys.readouterr().err.split("\r")[-1].strip()  # (after the progress bar's last redraw)
    assert rc != 0 and err.startswith("webinfer: error: ") and "\n" not in err and "K = 70000" in err, err


@pytest.mark.parametrize("shapes,const", [(((1, 70_000), (70_000, 3)), True), (((2, 3, 70_000), (70_000, 5)), False),
                                          (((4, 131_072), (131_072, 8)), False)])
def test_matmul_splits_a_long_k(shapes, const):
    """MatMul with K past the limit (GEMV of a constant, batched A, vec4-friendly K): products over K / S
    (a batch of S), then their sum by the reductions' kernel; equal to onnxruntime."""
    a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    feeds = {"a": a} if const else {"a": a, "b": b}
    m = model("MatMul", feeds, {"b": b} if const else {}, 1, 18)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    for target in ("software", "gpu"):
        got = WebinferRep(m, target=target).run(feeds)[0]
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=2e-2, err_msg=target)


def test_under_the_limit_still_builds():
    """The same families just under the limit run, equal to onnxruntime (the check is not too eager)."""
    feeds = {"a": f32(2, 30_000), "b": f32(30_000, 3)}
    m = model("MatMul", feeds, {}, 1, 18)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(WebinferRep(m, target="software").run(feeds)[0], want, rtol=1e-3, atol=1e-2)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_global_lp_pool_over_long_windows(p):
    """300 x 300 in one invocation passed the limit (every value wrong); now a row kernel per (n, c)."""
    x = rng.standard_normal((2, 3, 300, 300)).astype(np.float32)
    m = model("GlobalLpPool", {"x": x}, {}, 1, 18, p=p)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for target in ("software", "gpu"):
        got = WebinferRep(m, target=target).run({"x": x})[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, err_msg=target)


def test_global_lp_pool_small():
    x = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    m = model("GlobalLpPool", {"x": x}, {}, 1, 18, p=2)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(WebinferRep(m, target="software").run({"x": x})[0], want, rtol=1e-5)




@pytest.mark.parametrize("onesided,inverse", [(0, 0), (1, 0), (0, 1)])
@pytest.mark.parametrize("wide", [False, True])
def test_dft_in_passes(monkeypatch, onesided, inverse, wide):
    """The DFT's sum in passes (forced: passes of 7 terms over 100; past the limit a transform of 70 000 looped
    in one invocation, every value wrong), complex and real input, against onnxruntime; ``wide``: the phase
    carried from term to term (forced; j * k passes 2^32 from transforms of 65 537 on)."""
    from webinfer.codegen.kernels import spectral

    monkeypatch.setattr(spectral, "PASSES_FROM", 0)
    monkeypatch.setattr(spectral, "PASS_TERMS", 7)
    if wide:
        monkeypatch.setattr(spectral, "WIDE_FROM", 0)
    for x in (f32(2, 100, 1), f32(1, 100, 2)):
        if onesided and x.shape[-1] == 2:
            continue
        feeds = {"x": x}
        m = model("DFT", feeds, {"n": i64(100)[0], "ax": i64(1)[0]}, 1, 20, onesided=onesided, inverse=inverse)
        want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        np.testing.assert_allclose(WebinferRep(m, target="software").run(feeds)[0], want, rtol=1e-4, atol=1e-3)


def test_dft_past_the_loop_limit():
    """A real transform of 70 000 samples, onesided (35 001 frequencies x 70 000 terms, ~7 s here), against
    numpy's float64 FFT: onnxruntime's float32 DFT is off by 5.6 at this length (peak 825), ours by 0.009."""
    x = f32(1, 70_000, 1)
    m = model("DFT", {"x": x}, {"n": i64(70_000)[0], "ax": i64(1)[0]}, 1, 20, onesided=1)
    got = WebinferRep(m, target="software").run({"x": x})[0]
    ex = np.fft.rfft(x[0, :, 0].astype(np.float64))
    np.testing.assert_allclose(got[0], np.stack([ex.real, ex.imag], -1), atol=0.05)


@pytest.mark.parametrize("op,attrs", [("AveragePool", {}), ("MaxPool", {}), ("LpPool", {"p": 2})])
def test_pool_whose_window_is_the_input(op, attrs):
    """A pool whose one window is the whole 1 x 70 000 input (a global pool exported with explicit kernel_shape)
    takes the global form's row kernel; a window that slides still refuses (the pooling window case above)."""
    x = f32(2, 3, 1, 70_000, offset=0.3)
    x[:, :, 0, -5:] = 9.0  # the maximum past element 65535
    m = model(op, {"x": x}, {}, 1, 18, kernel_shape=[1, 70_000], **attrs)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(WebinferRep(m, target="software").run({"x": x})[0], want, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_full_dft_past_2_to_the_32():
    """A complex-output transform of 70 000 (j * k up to 4.9e9: the twiddle index overflowed u32, 91 % of the
    values wrong by up to 452), against numpy's float64 FFT; 10-30 s here."""
    x = f32(1, 70_000, 1)
    m = model("DFT", {"x": x}, {"n": i64(70_000)[0], "ax": i64(1)[0]}, 1, 20)
    got = WebinferRep(m, target="software").run({"x": x})[0]
    ex = np.fft.fft(x[0, :, 0].astype(np.float64))
    np.testing.assert_allclose(got[0], np.stack([ex.real, ex.imag], -1), atol=0.05)
