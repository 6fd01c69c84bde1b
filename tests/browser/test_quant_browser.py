"""Quantized formats in Chromium (Dawn/SwiftShader through Pyodide): uint8 activations quantized on the GPU
(DynamicQuantizeLinear), MatMulInteger / ConvInteger on int8 weights packed 4 per word, and weights read
through Cast (int8 * scale, float16) as packed matmul formats: equal to onnxruntime (integers exactly)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper
from onnx import numpy_helper as nh
from smoke_site import build_smoke_site, run_smoke_page

from webinfer.build import build

pytestmark = pytest.mark.browser


def _model() -> onnx.ModelProto:
    rng = np.random.default_rng(4)
    inits = [nh.from_array(rng.integers(-128, 128, (48, 20)).astype(np.int8), "wi"),
             nh.from_array(rng.integers(-128, 128, (6, 3, 3, 3)).astype(np.int8), "wc"),
             nh.from_array(rng.integers(-127, 128, (48, 24)).astype(np.int8), "w8"),
             nh.from_array((rng.random(24) * 0.01).astype(np.float32), "s8"),
             nh.from_array((rng.standard_normal((48, 16)) * 0.2).astype(np.float16), "w16")]
    n = helper.make_node
    nodes = [n("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             n("MatMulInteger", ["xq", "wi", "xz"], ["yi"]),
             n("DynamicQuantizeLinear", ["img"], ["iq", "is", "iz"]),
             n("ConvInteger", ["iq", "wc", "iz"], ["yc"], pads=[1, 1, 1, 1]),
             n("Cast", ["w8"], ["w8f"], to=T.FLOAT), n("Mul", ["w8f", "s8"], ["w8s"]),
             n("MatMul", ["x", "w8s"], ["y8"]),
             n("Cast", ["w16"], ["w16f"], to=T.FLOAT), n("MatMul", ["x", "w16f"], ["y16"])]
    g = helper.make_graph(nodes, "quant", [helper.make_tensor_value_info("x", T.FLOAT, [1, "rows", 48]),
                                           helper.make_tensor_value_info("img", T.FLOAT, [1, 3, 7, 7])],
                          [helper.make_empty_tensor_value_info(o) for o in ("xq", "yi", "yc", "y8", "y16")], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_quantized_formats_in_chromium(page, tmp_path, webinfer_wheel):
    model = _model()
    art = str(tmp_path / "quant.wi")
    build(model, art)
    rng = np.random.default_rng(5)
    feeds = [{"x": rng.standard_normal((1, rows, 48)).astype(np.float32),
              "img": rng.standard_normal((1, 3, 7, 7)).astype(np.float32)} for rows in (1, 5)]
    reference = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    site = build_smoke_site(art, str(tmp_path / "site"), feeds, wheel=webinfer_wheel)
    runs = run_smoke_page(page, site)["runs"]
    assert len(runs) == len(feeds)
    names = [o.name for o in model.graph.output]
    for feed, run in zip(feeds, runs):
        for name, want in zip(names, reference.run(None, feed)):
            arr = run[name]
            assert arr.shape == want.shape and arr.dtype == want.dtype, name
            if want.dtype.kind == "f":
                np.testing.assert_allclose(arr, want, rtol=1e-4, atol=1e-4, err_msg=name)
            else:
                np.testing.assert_array_equal(arr, want, err_msg=name)
