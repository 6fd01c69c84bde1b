"""Recurrent nets in Chromium (Dawn/Tint on SwiftShader), compared with onnxruntime: a bidirectional LSTM with
sequence_lens and initial states, a reverse GRU with linear_before_reset=0 (its reset kernel) over a symbolic
sequence length (the runtime loop, two lengths from one artifact), and onnxruntime's DynamicQuantizeLSTM (the
packed-weight GatherQ and the uint8-rounded hidden state). Built natively, run by the conformance page.

    pytest -m browser tests/browser/test_recurrent_browser.py
"""

from __future__ import annotations

import json
import os
import shutil
import time

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from conformance_site import SITE_TEMPLATE, decode, encode
from onnx import helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

import webinfer
from webinfer.serve import serve_in_thread

pytestmark = pytest.mark.browser
rng = np.random.default_rng(5)


def f32(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def _graph_model(node, inputs: dict, outputs: list[str], inits: dict, symbolic: dict | None = None):
    symbolic = symbolic or {}
    g = helper.make_graph([node], "g", [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), symbolic.get(n, v.shape))
        for n, v in inputs.items()], [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(v, n) for n, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def cases(tmp) -> dict:
    """name -> (model, [feeds per run])."""
    h = 8
    lstm_in = {"x": f32(5, 3, 6), "lens": np.array([5, 3, 1], np.int32), "h0": f32(2, 3, h), "c0": f32(2, 3, h)}
    lstm = helper.make_node("LSTM", ["x", "w", "r", "b", "lens", "h0", "c0"], ["y", "y_h", "y_c"], hidden_size=h,
                            direction="bidirectional")
    lstm_model = _graph_model(lstm, lstm_in, ["y", "y_h", "y_c"],
                              {"w": f32(2, 4 * h, 6), "r": f32(2, 4 * h, h), "b": f32(2, 8 * h)})
    gru = helper.make_node("GRU", ["x", "w", "r", "b"], ["y", "y_h"], hidden_size=h, direction="reverse")
    gru_model = _graph_model(gru, {"x": f32(4, 2, 6)}, ["y", "y_h"],
                             {"w": f32(1, 3 * h, 6), "r": f32(1, 3 * h, h), "b": f32(1, 6 * h)},
                             symbolic={"x": ["T", 2, 6]})
    fp32 = _graph_model(helper.make_node("LSTM", ["x", "w", "r", "b"], ["y", "y_h", "y_c"], hidden_size=16),
                        {"x": f32(4, 1, 12)}, ["y", "y_h", "y_c"],
                        {"w": f32(1, 64, 12), "r": f32(1, 64, 16), "b": f32(1, 128)})
    onnx.save(fp32, tmp / "lstm.onnx")
    quantize_dynamic(tmp / "lstm.onnx", tmp / "lstm_q.onnx", weight_type=QuantType.QInt8, op_types_to_quantize=["LSTM"])
    return {"lstm-bidirectional": (lstm_model, [lstm_in]),
            "gru-reverse-symbolic": (gru_model, [{"x": f32(4, 2, 6)}, {"x": f32(9, 2, 6)}]),
            "dynamic-quantize-lstm": (onnx.load(tmp / "lstm_q.onnx"), [{"x": f32(4, 1, 12) * 2}])}


@pytest.fixture(scope="module")
def page_results(browser, tmp_path_factory, webinfer_wheel):
    from webinfer.web import copy_pyodide, pyodide_dir

    root = tmp_path_factory.mktemp("recurrent")
    site = str(root / "site")
    os.makedirs(os.path.join(site, "wheels"))
    for name in ("index.html", "boot.mjs", "main.py"):
        shutil.copyfile(SITE_TEMPLATE / name, os.path.join(site, name))
    copy_pyodide(pyodide_dir(), site)
    shutil.copy(webinfer_wheel, os.path.join(site, "wheels"))
    entries, expected = [], {}
    for name, (model, runs) in cases(root).items():
        art = str(root / name)
        webinfer.build(model, art)
        shutil.copytree(art, os.path.join(site, "cases", name))
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        expected[name] = [sess.run(None, feeds) for feeds in runs]
        entries.append({"name": name, "artifact": f"cases/{name}/", "outputs": None,
                        "runs": [{"inputs": {k: encode(v) for k, v in feeds.items()}, "dims": None, "outputs": None}
                                 for feeds in runs]})
    with open(os.path.join(site, "site.json"), "w") as f:
        json.dump({"wheel": f"wheels/{os.path.basename(webinfer_wheel)}", "cases": entries}, f)
    server, url = serve_in_thread(site)
    page = browser.new_page()
    console = []
    page.on("console", lambda m: console.append(f"[{m.type}] {m.text}"))
    try:
        t0 = time.perf_counter()
        page.goto(url + "index.html")
        page.wait_for_selector("#results[data-done]", state="attached", timeout=300_000)
        el = page.locator("#results")
        assert el.get_attribute("data-error") is None, el.get_attribute("data-error") + "\n".join(console[-30:])
        result = json.loads(el.get_attribute("data-results"))
        result["page_s"] = time.perf_counter() - t0
    finally:
        page.close()
        server.shutdown()
        server.server_close()
    return result, expected


@pytest.mark.parametrize("name", ["lstm-bidirectional", "gru-reverse-symbolic", "dynamic-quantize-lstm"])
def test_recurrent_in_chromium(page_results, name):
    result, expected = page_results
    got = result["cases"][name]
    assert "error" not in got, f"{name} in Chromium ({result['adapter']}): {got.get('error')}"
    want = [w for run in expected[name] for w in run]  # the page returns every run's outputs in order
    outs = [decode(o) for o in got["outputs"]]
    assert len(outs) == len(want)
    for g, w in zip(outs, want):
        np.testing.assert_allclose(g.reshape(w.shape), w, rtol=1e-3, atol=1e-4)
