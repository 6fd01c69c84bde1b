"""The mask epilogue (``--task image-segmentation`` / ``background-removal``: the mask resized to the original
image on the GPU, argmax or the matte applied as alpha) against a reference written here: onnxruntime runs the
model on a PIL letterbox of the image, then crops its mask to the picture and resizes it with onnxruntime's own
Resize (bilinear, half-pixel). The real segmentation net is PP-OCRv4's text detector from the zoo cache (a DBNet:
per-pixel text probability, 4.7 MB, rapidocr-onnxruntime); no matting model ships inside a package we could find
(rembg, MODNet and background-removal wrappers download theirs at run time), so the argmax and matte cases
also run small synthetic nets with symbolic H/W."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.graph.test_detect_epilogue import letterbox
from webinfer.build import build
from webinfer.errors import WebinferError
from webinfer.runtime.inference import InferenceSession
from webinfer.runtime.session import run_sync
from webinfer.runtime.vision_tasks import segment, session_parts


def segmentation_model(classes: int, matte: bool, seed: int = 0) -> onnx.ModelProto:
    """Conv 3 -> 8, Relu, Conv 8 -> classes (3x3, same size), then a Sigmoid for a matte: [1, classes, H, W]."""
    rng = np.random.default_rng(seed)
    inits = {"w1": (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32),
             "b1": rng.standard_normal(8).astype(np.float32) * 0.1,
             "w2": (rng.standard_normal((classes, 8, 3, 3)) * 0.3).astype(np.float32)}
    N = helper.make_node
    nodes = [N("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), N("Relu", ["c1"], ["r1"]),
             N("Conv", ["r1", "w2"], ["logits" if not matte else "c2"], pads=[1, 1, 1, 1])]
    if matte:
        nodes.append(N("Sigmoid", ["c2"], ["logits"]))
    g = helper.make_graph(nodes, "seg", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, classes, "H", "W"])],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


def resize_reference(mask: np.ndarray, geometry, hw) -> np.ndarray:
    """The mask cropped to the picture, resized to the image by onnxruntime's Resize (linear, half_pixel)."""
    rh, rw, top, left = geometry
    crop = np.ascontiguousarray(mask[:, :, top:top + rh, left:left + rw])
    g = helper.make_graph([helper.make_node("Resize", ["m", "", "", "sizes"], ["y"], mode="linear")], "r",
                          [helper.make_tensor_value_info("m", TensorProto.FLOAT, list(crop.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(np.array([1, crop.shape[1], *hw], np.int64), "sizes")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"m": crop})[0][0]


def array(t) -> np.ndarray:
    return np.frombuffer(t.data, {"float32": np.float32, "int32": np.int32}[t.dtype]).reshape(t.shape)


def picture(h: int, w: int, seed: int) -> np.ndarray:
    """RGBA: smooth colour ramps, a disc and a box, a varying alpha."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.stack([255 * yy / h, 255 * xx / w, 128 + 100 * np.sin((xx + yy + 7 * seed) / 9)], -1)
    img[(yy - h / 2) ** 2 + (xx - w / 3) ** 2 < (min(h, w) / 4) ** 2] = [250, 240, 20]
    img[h // 5:h // 2, w // 2:w - 3] = [10, 30, 200]
    alpha = np.where(xx < w / 2, 255, 200)[..., None]
    return np.concatenate([img, alpha], -1).clip(0, 255).astype(np.uint8)


SIZE = [48, 64]
PRE = {"resize": {"letterbox": SIZE, "pad": 0}}
SIZES = [(30, 70), (96, 50), (48, 64)]  # wide, tall (both letterboxed), exact


@pytest.mark.parametrize("task", ["background-removal", "image-segmentation"])
def test_mask_epilogue_equals_resized_onnxruntime_mask(task, tmp_path):
    matte = task == "background-removal"
    model = segmentation_model(1 if matte else 5, matte)
    art = str(tmp_path / "seg.wi")
    build(model, art, preprocess=PRE, task=task)
    core, read_asset = session_parts(InferenceSession(art))
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for k, (h, w) in enumerate(SIZES):
        rgba = picture(h, w, k)
        planes, geometry = letterbox(rgba[..., :3], SIZE, 0.0, "center")
        mask = ref.run(None, {"x": (planes / 255)[None].astype(np.float32)})[0]
        want = resize_reference(mask, geometry, (h, w))
        got = run_sync(segment(core, rgba.tobytes(), w, h, read_asset))
        assert (got["width"], got["height"]) == (w, h)
        if matte:
            np.testing.assert_allclose(array(got["matte"]), want[0], atol=1e-3, err_msg=f"{h}x{w}")
            cut = np.frombuffer(got["cutout"], np.uint8).reshape(h, w, 4)
            assert (cut[..., :3] == rgba[..., :3]).all()
            alpha = np.round(np.clip(want[0], 0, 1) * rgba[..., 3])
            assert np.abs(cut[..., 3].astype(np.float64) - alpha).max() <= 1
        else:
            seg = array(got["segments"])
            top2 = np.sort(want, 0)[-2:]
            clear = top2[1] - top2[0] > 1e-4  # pixels whose best class is not a near tie
            assert seg.shape == (h, w) and clear.mean() > 0.99
            assert (seg[clear] == want.argmax(0)[clear]).all(), f"{h}x{w}: {(seg != want.argmax(0)).sum()} pixels"
            assert len(np.unique(seg)) > 1


def test_mask_epilogue_errors(tmp_path):
    with pytest.raises(WebinferError, match="needs an image prologue"):
        build(segmentation_model(1, True), str(tmp_path / "a.wi"), task="background-removal")
    with pytest.raises(WebinferError, match="not a centre crop"):
        build(segmentation_model(1, True), str(tmp_path / "b.wi"), task="background-removal",
              preprocess={"resize": {"shorter": 40}, "crop": [32, 32]})
    with pytest.raises(WebinferError, match="mode 'blur'"):
        build(segmentation_model(1, True), str(tmp_path / "c.wi"), task="image-segmentation", preprocess=PRE,
              postprocess={"mode": "blur"})
    with pytest.raises(WebinferError, match="one channel"):
        build(segmentation_model(3, False), str(tmp_path / "d.wi"), task="background-removal", preprocess=PRE)


@pytest.mark.slow
def test_real_text_segmenter_mask_as_matte(tmp_path):
    """A real segmentation net from a package: PP-OCRv4's text detector (rapidocr-onnxruntime, a DBNet: a
    per-pixel text probability [1, 1, H, W]) built with a letterbox and the matte epilogue; its mask at the
    image's size within 1e-3 of onnxruntime's mask cropped and resized by onnxruntime's Resize."""
    from benchmarks.zoo.inputs import draw
    from tests.graph.test_detect_epilogue import zoo_model

    path = zoo_model("ppocrv4-det")
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    art = str(tmp_path / "text.wi")
    build(path, art, preprocess={"resize": {"letterbox": [320, 320], "pad": 0}, "mean": mean, "std": std},
          task="background-removal")
    core, read_asset = session_parts(InferenceSession(art))
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for k, (h, w) in enumerate([(200, 300), (400, 260), (320, 320)]):
        rgb = draw("document", h, w, k).astype(np.uint8)
        planes, geometry = letterbox(rgb, [320, 320], 0.0, "center")
        x = (planes / 255 - np.array(mean)[:, None, None]) / np.array(std)[:, None, None]
        mask = ref.run(None, {ref.get_inputs()[0].name: x[None].astype(np.float32)})[0]
        want = resize_reference(mask, geometry, (h, w))[0]
        rgba = np.concatenate([rgb, np.full((h, w, 1), 255, np.uint8)], -1)
        got = array(run_sync(segment(core, rgba.tobytes(), w, h, read_asset))["matte"])
        assert want.max() > 0.5 and (want > 0.5).mean() > 0.01  # text found
        err = np.abs(got - want).max()
        print(f"ppocrv4-det matte at {h}x{w}: max abs error {err:.1e}")
        assert err <= 1e-3, f"{h}x{w}: {err}"
