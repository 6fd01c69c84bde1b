"""GridSample and AffineGrid against onnx.reference: every mode x padding x align_corners, 1-3 spatial dims,
coordinates beyond [-1, 1] (so padding and reflection matter)."""

import numpy as np
import pytest
from oprefs import check_node, make_model

from webinfer.backend import WebinferRep

rng = np.random.default_rng(0)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_2d(mode, padding, align):
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    grid = rng.uniform(-1.7, 1.7, (2, 4, 7, 2)).astype(np.float32)
    check_node("GridSample", {"x": x, "grid": grid}, opset=22, mode=mode, padding_mode=padding, align_corners=align)


@pytest.mark.parametrize("shape,out", [((1, 2, 9), (1, 5, 1)), ((2, 1, 3, 4, 5), (2, 2, 3, 4, 3))])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_grid_sample_1d_3d(shape, out, mode):
    x = rng.standard_normal(shape).astype(np.float32)
    grid = rng.uniform(-1.3, 1.3, out).astype(np.float32)
    check_node("GridSample", {"x": x, "grid": grid}, opset=22, mode=mode, padding_mode="reflection")


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_grid_sample_opset16_names(mode):
    """Opset 16 spells the modes bilinear/bicubic (the reference evaluator knows only 20's names: onnxruntime)."""
    import onnxruntime as ort
    from onnx import helper

    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    grid = rng.uniform(-1, 1, (1, 3, 3, 2)).astype(np.float32)  # outside, onnxruntime's bicubic border differs
    model = make_model([helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode="border")],
                       {"x": x, "grid": grid}, ["y"], opset=16)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x, "grid": grid})
    got = WebinferRep(model).run({"x": x, "grid": grid})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("size", [(2, 3, 4, 5), (1, 2, 3, 4, 2)])
@pytest.mark.parametrize("align", [0, 1])
def test_affine_grid(size, align):
    r = len(size) - 2
    theta = rng.standard_normal((size[0], r, r + 1)).astype(np.float32)
    _, _, _, gpu = check_node("AffineGrid", {"theta": theta}, initializers={"size": np.array(size, np.int64)},
                              opset=20, align_corners=align)
    assert gpu


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ctm,ratio", [("half_pixel", 0), ("output_half_pixel", 2)])
def test_roi_align(mode, ctm, ratio):
    x = rng.standard_normal((2, 3, 10, 9)).astype(np.float32)
    rois = np.array([[0, 0, 8, 8], [1.5, 2.2, 7.1, 9.5], [-2, -1, 3, 4], [4, 4, 4.2, 4.1]], np.float32)
    batch = np.array([0, 1, 1, 0], np.int64)
    _, _, _, gpu = check_node("RoiAlign", {"x": x, "rois": rois, "b": batch}, opset=22, mode=mode,
                              coordinate_transformation_mode=ctm, sampling_ratio=ratio, output_height=3,
                              output_width=2, spatial_scale=0.9)
    assert gpu
