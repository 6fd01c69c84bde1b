"""The whole path in a browser: build a model, assemble the site, run it in headless Chromium through
Pyodide + BrowserDevice, and compare with the native run and onnxruntime."""

import base64
import json
import time
from urllib.parse import urlparse

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from smoke_site import build_smoke_site

import webinfer
from webinfer.build import build
from webinfer.serve import serve_in_thread

pytestmark = pytest.mark.browser
TOL = 1e-5


def smoke_model() -> onnx.ModelProto:
    """Elementwise chain with weights, broadcasting and a symbolic batch dim, plus an int64 branch."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((8,)).astype(np.float32)
    s = rng.uniform(0.5, 2.0, (1, 8)).astype(np.float32)
    nodes = [
        helper.make_node("Add", ["x", "w"], ["a"]),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("Mul", ["r", "s"], ["m"]),
        helper.make_node("Sigmoid", ["m"], ["y"]),
        helper.make_node("Mul", ["k", "k2"], ["kk"]),
        helper.make_node("Add", ["kk", "k"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes, "smoke",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8]),
         helper.make_tensor_value_info("k", TensorProto.INT64, [5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8]),
         helper.make_tensor_value_info("z", TensorProto.INT64, [5])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(s, "s"),
         numpy_helper.from_array(np.array([3, -2, 0, 7, 1], np.int64), "k2")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_smoke_page_matches_native_and_onnxruntime(page, tmp_path, webinfer_wheel):
    model = smoke_model()
    feeds = {"x": np.random.default_rng(2).standard_normal((3, 8)).astype(np.float32),
             "k": np.array([1, -4, 9, 1000, -7], np.int64)}
    art = str(tmp_path / "smoke.wi")
    build(model, art)
    native = webinfer.InferenceSession(art).run(None, feeds)
    reference = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)

    site = build_smoke_site(art, str(tmp_path / "site"), feeds, wheel=webinfer_wheel)
    server, url = serve_in_thread(site)
    console, requests = [], []
    page.on("console", lambda m: console.append(f"[{m.type}] {m.text}"))
    page.on("pageerror", lambda e: console.append(f"[pageerror] {e}"))
    page.on("request", lambda r: requests.append(r.url))
    try:
        t0 = time.perf_counter()
        page.goto(url + "index.html")
        page.wait_for_selector("#outputs[data-done]", state="attached", timeout=180_000)
        seconds = time.perf_counter() - t0
        el = page.locator("#outputs")
        log = "\n".join(console[-40:])
        error = el.get_attribute("data-error")
        assert error is None, f"page failed: {error}\nconsole:\n{log}"
        outputs = json.loads(el.get_attribute("data-outputs"))
        timings = json.loads(el.get_attribute("data-timings"))
    finally:
        server.shutdown()
        server.server_close()
    print(f"browser smoke: {seconds:.1f} s in the page; {timings}; adapter {el.get_attribute('data-adapter')}")

    assert list(outputs) == ["y", "z"]
    for (name, got), nat, ref in zip(outputs.items(), native, reference):
        arr = np.frombuffer(base64.b64decode(got["b64"]), dtype=got["dtype"]).reshape(got["shape"])
        assert arr.dtype == ref.dtype and arr.shape == ref.shape, f"{name}: {arr.dtype}{arr.shape}"
        np.testing.assert_allclose(arr, nat, rtol=TOL, atol=TOL, err_msg=f"{name}: browser vs native")
        np.testing.assert_allclose(arr, ref, rtol=TOL, atol=TOL, err_msg=f"{name}: browser vs onnxruntime")
    hosts = {urlparse(u).hostname for u in requests if not u.startswith(("data:", "blob:"))}
    assert hosts == {"127.0.0.1"}, f"the page reached beyond 127.0.0.1: {sorted(set(requests))}"
