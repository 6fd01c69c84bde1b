"""One artifact for every image size: a text-detection-style model with symbolic H and W, built once and run
at several sizes against onnxruntime; a soak over 200 random sizes with flat memory; bounded dims
(``--dim H=lo..hi``) with one plan and clear errors outside the range."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from vision_models import text_detection_model

from webinfer.build import build
from webinfer.cli import main as cli_main
from webinfer.errors import WebinferError
from webinfer.runtime.inference import InferenceSession

SIZES = [(37, 53), (64, 64), (31, 20), (9, 96), (1, 1)]  # odd, square, non-square, tiny
TOL = 1e-4


@pytest.fixture(scope="module")
def detection(tmp_path_factory):
    model = text_detection_model()
    art = str(tmp_path_factory.mktemp("det") / "det.wi")
    manifest = build(model, art)
    reference = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return model, art, manifest, reference


def _image(rng, h, w):
    return rng.random((1, 3, h, w), dtype=np.float32)


@pytest.mark.parametrize("kernel_class", ["software", "gpu"])
def test_text_detection_five_sizes_match_onnxruntime(detection, kernel_class):
    _, art, manifest, reference = detection
    assert manifest["dims"] == ["H", "W"]
    session = InferenceSession(art, kernel_class=kernel_class)
    rng = np.random.default_rng(0)
    for h, w in SIZES:
        x = _image(rng, h, w)
        got = session.run(None, {"x": x})[0]
        want = reference.run(None, {"x": x})[0]
        assert got.shape == want.shape == (1, 1, h, w)
        np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL, err_msg=f"at {h}x{w}")


def test_soak_200_random_sizes_keeps_memory_flat(detection, tmp_path):
    model, art, _, _ = detection
    model_path = tmp_path / "det.onnx"
    model_path.write_bytes(model.SerializeToString())
    script = Path(__file__).with_name("soak_run.py")
    done = subprocess.run([sys.executable, str(script), art, str(model_path), "200"], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["worst_tol_ratio"] <= 1.0, got["worst_tol_ratio"]  # |got - want| <= 1e-4 + 1e-4 |want|
    assert max(got["plans"]) <= got["max_plans"]
    assert max(abs(v) for v in got["leaks"]) < 4096, got["leaks"]
    rss = got["rss"]
    assert max(rss[5:]) - rss[4] < 8, f"RSS grew from {rss[4]:.1f} to {max(rss[5:]):.1f} MiB: {rss}"
    assert got["plan_bytes"] <= got["max_plans"] * got["biggest_plan"]


def test_bounded_dims_share_one_plan_and_refuse_outside(detection, tmp_path, capsys):
    model, _, _, reference = detection
    art = str(tmp_path / "bounded.wi")
    manifest = build(model, art, dims={"H": (8, 61), "W": (8, 64)})
    assert manifest["bounds"] == {"H": 61, "W": 64}
    session = InferenceSession(art)
    rng = np.random.default_rng(2)
    for h, w in [(61, 64), (8, 8), (33, 17), (50, 63), (9, 40), (61, 9)]:
        x = _image(rng, h, w)
        np.testing.assert_allclose(session.run(None, {"x": x})[0], reference.run(None, {"x": x})[0], rtol=TOL,
                                   atol=TOL, err_msg=f"at {h}x{w}")
    assert len(session._core.plans()) == 1  # buffers planned once, for the bounds
    with pytest.raises(WebinferError, match=r"dim 'H' = 62 exceeds the bound 61 .*--dim H=LO..HI"):
        session.run(None, {"x": _image(rng, 62, 8)})
    with pytest.raises(WebinferError, match=r"W=7 .*--dim W=8..64: W must be at least 8"):
        session.run(None, {"x": _image(rng, 8, 7)})
    # the command line: name=lo..hi parses, bad forms and unknown names are one-line errors
    path = str(tmp_path / "det.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    assert cli_main(["build", path, "-o", str(tmp_path / "cli.wi"), "--dim", "H=16..32", "--dim", "W=8"]) == 0
    for bad, message in [("H=32..16", "1 <= lo <= hi"), ("H=a..b", "name=integer or name=lo..hi"),
                         ("Q=1..4", "no symbolic dim named 'Q'")]:
        assert cli_main(["build", path, "-o", str(tmp_path / "bad.wi"), "--dim", bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err


def test_output_concatenating_the_input_along_h_is_not_a_kv_cache(tmp_path):
    """Concat(4-D graph input, x, axis=2) as a graph output is also how a decoder writes its KV cache; without
    an attention product after it, it is an ordinary concat (the build used to refuse it: 'cannot build for
    generation')."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, None, "W"])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Concat", ["x", "r"], ["y"],
                                                                                        axis=2)], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    art = str(tmp_path / "cat.wi")
    build(model, art)
    feed = {"x": np.random.default_rng(4).standard_normal((1, 3, 5, 7)).astype(np.float32)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    np.testing.assert_array_equal(InferenceSession(art).run(None, feed)[0], want)
