"""Kernel classes in the page: the worker's chooseProgram (webinfer/site/gpu_device.mjs) and Python's select.py
pick the same program of a portable artifact on Chromium's SwiftShader (software-subgroups: a CPU adapter
with subgroups), and the page's ?class=gpu (load(url, {kernelClass})) runs another one correctly there."""

import json
from urllib.parse import urlparse

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from webinfer.build import build
from webinfer.bundle import bundle
from webinfer.serve import serve_in_thread

pytestmark = pytest.mark.browser


def test_page_picks_a_class_and_runs_both(page, tmp_path, webinfer_wheel):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((6, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Tanh", ["m"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(w, "w")])
    art, site = str(tmp_path / "m.wi"), str(tmp_path / "site")
    build(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), art)
    bundle(art, site, wheel=webinfer_wheel)
    want = np.tanh(np.ones((1, 6), np.float32) @ w)  # numpy, independent of webinfer
    server, url = serve_in_thread(site)
    requests = []
    page.on("request", lambda req: requests.append(req.url))
    runs = {}
    try:
        for query in ("", "?class=gpu"):
            page.goto(url + "model/" + query)
            page.wait_for_selector("#result[data-done]", state="attached", timeout=180_000)
            assert page.locator("#result").get_attribute("data-error") is None, page.locator("#status").inner_text()
            runs[query] = {k: json.loads(page.locator("#result").get_attribute(f"data-{k}"))
                           for k in ("outputs", "kernel-class")}
    finally:
        server.shutdown()
        server.server_close()
    assert runs[""]["kernel-class"]["name"] == "software-subgroups"  # the worker's and Python's choice (they agree)
    assert "cpu adapter" in runs[""]["kernel-class"]["why"]
    assert runs["?class=gpu"]["kernel-class"]["name"] == "gpu"
    for got in (r["outputs"] for r in runs.values()):
        assert got["y"]["shape"] == [1, 3]
        np.testing.assert_allclose(got["y"]["head"], want.reshape(-1), rtol=1e-5, atol=1e-6)
    assert {urlparse(u).hostname for u in requests} == {"127.0.0.1"}


def test_page_reads_packed_weights_as_textures(page, tmp_path, webinfer_wheel):
    """An int4 MatMul in the page on SwiftShader's software-subgroups program, whose words and block parameters
    are textures (the worker's loader writes them, format/textures.py's layout spanning many rows): the first
    outputs and the sum of squares of all 700 against numpy on the weights unpacked independently."""
    from quantref import unpack_reference

    from webinfer.graph.quantize import quantize_nk

    k, n = 512, 700
    w = np.random.default_rng(5).standard_normal((k, n)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Mul", ["y", "y"], ["y2"]),
         helper.make_node("ReduceSum", ["y2"], ["s"], keepdims=1)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", n]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 1])],
        [numpy_helper.from_array(w, "w")])
    art, site = str(tmp_path / "m.wi"), str(tmp_path / "site")
    manifest = build(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), art, quantize="int4")
    chosen = next(p for p in manifest["programs"] if p["class"] == "software-subgroups")
    assert sorted(f for _, f in chosen["textures"]) == ["rg32float", "rgba32uint"]
    bundle(art, site, wheel=webinfer_wheel)
    server, url = serve_in_thread(site)
    try:
        page.goto(url + "model/")
        page.wait_for_selector("#result[data-done]", state="attached", timeout=180_000)
        assert page.locator("#result").get_attribute("data-error") is None, page.locator("#status").inner_text()
        outputs = json.loads(page.locator("#result").get_attribute("data-outputs"))
        assert json.loads(page.locator("#result").get_attribute("data-kernel-class"))["name"] == "software-subgroups"
    finally:
        server.shutdown()
        server.server_close()
    y = np.ones((1, k)) @ unpack_reference(*quantize_nk(w.T, "int4"), "int4", k).T  # the page feeds ones
    np.testing.assert_allclose(outputs["y"]["head"], y[0, :8], rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(outputs["s"]["head"], [np.sum(y * y)], rtol=1e-4)
