"""Vision test helpers (native and browser tests): small models built with onnx.helper (random weights,
symbolic height and width, so one artifact serves every image size) and a PIL/numpy reference of the
``--preprocess`` image prologue."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from PIL import Image


def text_detection_model(seed: int = 0) -> onnx.ModelProto:
    """In the style of a text-detection network (DBNet/EAST): pad the image to a multiple of 8 (shape
    arithmetic), a strided Conv and a ceil-mode MaxPool down, ConvTranspose and Resize (linear to the skip's
    size, nearest by scale 2) up, skip Concats, a Slice back to the input's size and a Sigmoid map.
    Input ``x`` [1, 3, H, W], output ``y`` [1, 1, H, W]."""
    rng = np.random.default_rng(seed)

    def w(*shape):
        return (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)

    i64 = lambda *v: np.array(v, np.int64)  # noqa: E731
    inits = {"w1": w(8, 3, 3, 3), "b1": w(8), "w2": w(16, 8, 3, 3), "w3": w(16, 16, 3, 3), "wt": w(16, 16, 2, 2),
             "w4": w(8, 32, 3, 3), "w5": w(1, 16, 3, 3), "b5": w(1), "scales": np.array([1, 1, 2, 2], np.float32),
             "roi": np.zeros(0, np.float32), "nc": i64(1, 16), "i2": i64(2), "i4": i64(4), "e8": i64(8),
             "z6": np.zeros(6, np.int64), "z2": i64(0, 0), "ax": i64(2, 3)}
    N = helper.make_node
    nodes = [
        # pad H and W up to a multiple of 8: pads = (8 - hw % 8) % 8 at the end
        N("Shape", ["x"], ["shx"]), N("Slice", ["shx", "i2", "i4"], ["hw"]), N("Mod", ["hw", "e8"], ["m8"]),
        N("Sub", ["e8", "m8"], ["p8"]), N("Mod", ["p8", "e8"], ["pend"]),
        N("Concat", ["z6", "pend"], ["pads"], axis=0), N("Pad", ["x", "pads"], ["xp"]),
        N("Conv", ["xp", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), N("Relu", ["c1"], ["r1"]),
        N("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]), N("Relu", ["c2"], ["r2"]),
        N("MaxPool", ["r2"], ["p2"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
        N("Conv", ["p2", "w3"], ["c3"], pads=[1, 1, 1, 1]), N("Relu", ["c3"], ["r3"]),
        N("ConvTranspose", ["r3", "wt"], ["u1"], strides=[2, 2]),
        N("Shape", ["r2"], ["sh2"]), N("Slice", ["sh2", "i2", "i4"], ["hw2"]),
        N("Concat", ["nc", "hw2"], ["size2"], axis=0),
        N("Resize", ["u1", "roi", "", "size2"], ["u1r"], mode="linear"),
        N("Concat", ["u1r", "r2"], ["m1"], axis=1),
        N("Conv", ["m1", "w4"], ["c4"], pads=[1, 1, 1, 1]), N("Relu", ["c4"], ["r4"]),
        N("Resize", ["r4", "roi", "scales"], ["u2"], mode="nearest"),
        N("Concat", ["u2", "r1"], ["m2"], axis=1),
        N("Conv", ["m2", "w5", "b5"], ["c5"], pads=[1, 1, 1, 1]),
        N("Slice", ["c5", "z2", "hw", "ax"], ["crop"]), N("Sigmoid", ["crop"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "text_detection",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, "H", "W"])],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    onnx.checker.check_model(model, full_check=True)
    return model


PIL_MODES = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC, "nearest": Image.NEAREST}
ORDERS = {"RGB": [0, 1, 2], "BGR": [2, 1, 0]}


def preprocess_reference(rgba: np.ndarray, spec: dict) -> np.ndarray:
    """The prologue in PIL and numpy: PIL's float resize per channel (antialiased when shrinking), centre crop
    (offset (size - crop) // 2), (v * scale - mean) / std, layout."""
    h, w = rgba.shape[:2]
    resize = spec.get("resize", {})
    if "shorter" in resize:
        n, short = resize["shorter"], min(h, w)
        size = ((2 * h * n + short) // (2 * short), (2 * w * n + short) // (2 * short))
    else:
        size = tuple(resize.get("size", (h, w)))
    mode = PIL_MODES[spec.get("interpolation", "bilinear")]
    planes = np.stack([np.asarray(Image.fromarray(rgba[..., c].astype(np.float32), mode="F")
                                  .resize((size[1], size[0]), mode)) for c in ORDERS[spec.get("channels", "RGB")]])
    ch, cw = spec.get("crop", size)
    top, left = (size[0] - ch) // 2, (size[1] - cw) // 2
    x = planes[:, top:top + ch, left:left + cw].astype(np.float64) * spec.get("scale", 1 / 255)
    mean, std = (np.broadcast_to(np.array(spec.get(k, d), np.float64), (3,)) for k, d in (("mean", 0.0), ("std", 1.0)))
    x = (x - mean[:, None, None]) / std[:, None, None]
    x = x[None].astype(np.float32)
    return x.transpose(0, 2, 3, 1) if spec.get("layout") == "NHWC" else x
