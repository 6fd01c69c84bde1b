"""Test helper: one contrib-op model through webinfer and through onnxruntime's CPU provider (the reference:
onnx's ReferenceEvaluator does not know com.microsoft ops)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import helper
from oprefs import make_model

from webinfer.backend import WebinferRep

MS = "com.microsoft"


def contrib_model(nodes, inputs: dict, outputs: list[str], initializers: dict | None = None, opset: int = 18):
    """inputs: name -> array (dtype and shape declared); outputs: names; the com.microsoft opset imported."""
    model = make_model(nodes, inputs, outputs, initializers, opset)
    model.opset_import.append(helper.make_opsetid(MS, 1))
    return model


def ort_run(model, feeds: dict) -> list[np.ndarray]:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def check_ort(model, feeds: dict, rtol: float = 1e-4, atol: float = 1e-5, target: str = "software"):
    """Outputs of webinfer (kernel class ``target``) equal onnxruntime's within tolerance; returns both."""
    want = ort_run(model, feeds)
    rep = WebinferRep(model, target=target)
    got = rep.run(feeds)
    assert len(got) == len(want)
    for w, g in zip(want, got):
        assert g.shape == w.shape, f"shape {g.shape} != onnxruntime's {w.shape}"
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)
    return want, got
