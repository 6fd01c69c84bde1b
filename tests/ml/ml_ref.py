"""Shared by the classic-ML tests: build a model with webinfer, run it, and compare with onnxruntime CPU (the
reference these ai.onnx.ml ops are defined by in practice): labels exactly, scores within 1e-5 relative."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort

from webinfer.build import build
from webinfer.runtime.inference import InferenceSession

RTOL = 1e-5


def ort_run(model: onnx.ModelProto, feeds: dict) -> list:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def webinfer_run(model: onnx.ModelProto, feeds: dict, tmp_path) -> tuple[list, InferenceSession]:
    """Build (the software kernel class: one program, enough here) and run through the public API."""
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    build(str(path), str(tmp_path / "out"), target="software")
    session = InferenceSession(str(tmp_path / "out"))
    return session.run(None, feeds), session


def assert_same(got, want, what: str = "", rtol: float = RTOL) -> None:
    """One output against onnxruntime's: ZipMap dicts key by key, labels exactly, numbers within ``rtol``."""
    if isinstance(want, list):  # ZipMap: a {label: probability} dict per row
        assert isinstance(got, list) and len(got) == len(want), what
        for g, w in zip(got, want):
            assert list(g) == list(w), f"{what}: labels {list(g)} != {list(w)}"
            np.testing.assert_allclose([g[k] for k in w], list(w.values()), rtol=rtol, atol=rtol, err_msg=what)
        return
    want, got = np.asarray(want), np.asarray(got)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if want.dtype.kind in "OUSiub":
        assert got.dtype.kind == want.dtype.kind or want.dtype.kind in "OUS", f"{what}: {got.dtype} != {want.dtype}"
        assert got.tolist() == want.tolist(), f"{what}: {got.tolist()[:10]} != {want.tolist()[:10]}"
        return
    assert got.dtype == want.dtype, f"{what}: {got.dtype} != {want.dtype}"
    scale = float(np.nanmax(np.abs(want))) if want.size and not np.isnan(want).all() else 1.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * max(scale, 1e-3), err_msg=what)


def check(model: onnx.ModelProto, feeds: dict, tmp_path, rtol: float = RTOL) -> InferenceSession:
    """Every output equal to onnxruntime's, and every ai.onnx.ml node lowered to GPU kernels."""
    want = ort_run(model, feeds)
    got, session = webinfer_run(model, feeds, tmp_path)
    names = [o.name for o in model.graph.output]
    assert len(got) == len(want)
    for name, g, w in zip(names, got, want):
        assert_same(g, w, name, rtol)
    ml_ops = {n.op_type for n in model.graph.node if n.domain == "ai.onnx.ml"} - {"ZipMap"}
    rows = [r for r in session.program.placement if r.op in ml_ops]
    assert rows or not ml_ops
    for row in rows:
        assert row.where == "gpu" and row.dispatches > 0, f"{row.op} ran as {row.where}"
    return session
