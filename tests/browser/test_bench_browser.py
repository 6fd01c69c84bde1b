"""`webinfer bench`'s browser columns on a tiny model: webinfer in Pyodide, onnxruntime-web webgpu and wasm in
one headless Chromium, every output checked against onnxruntime CPU by the harness, every cell a time (steady
state and first result); a model an engine cannot load is a cell that says why, and the run goes on."""

from __future__ import annotations

import os
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from webinfer.build import build

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from benchmarks import harness  # noqa: E402
from benchmarks import spec as S  # noqa: E402
from benchmarks.browser import run_browser  # noqa: E402

pytestmark = pytest.mark.browser


def tiny_model(path) -> str:
    """y = tanh(x @ w) + b: a MatMul, an elementwise epilogue and a broadcast, with weights."""
    rng = np.random.default_rng(3)
    w, b = rng.standard_normal((16, 8)).astype(np.float32), rng.standard_normal((8,)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Tanh", ["m"], ["t"]),
         helper.make_node("Add", ["t", "b"], ["y"])], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_browser_engines_fill_every_cell(tmp_path):
    onnx_path = tiny_model(tmp_path / "tiny.onnx")
    build(onnx_path, str(tmp_path / "tiny.wi"), cpu=True)  # (cpu: the CPU path's column runs its CPU model)
    x = np.random.default_rng(4).standard_normal((4, 16)).astype(np.float32)
    good = S.ModelSpec("tiny", onnx_path, {"x": x}, artifact=str(tmp_path / "tiny.wi"))
    # A model every engine fails on: its ONNX file is garbage and its artifact lacks its weights.
    (tmp_path / "broken.onnx").write_bytes(b"not an onnx file")
    build(onnx_path, str(tmp_path / "broken.wi"), cpu=True)
    for shard in [*(tmp_path / "broken.wi").rglob("*.bin"), *(tmp_path / "broken.wi").rglob("cpu-model.onnx")]:
        shard.unlink()
    broken = S.ModelSpec("broken", str(tmp_path / "broken.onnx"), {"x": x}, artifact=str(tmp_path / "broken.wi"),
                         outputs=["y"], reference={"y": np.zeros((4, 8), np.float32)})
    S.prepare(good)
    logs: list[str] = []
    # the harness's browser pass; its rows_for checks each engine's outputs against onnxruntime CPU's
    # (in a thread of its own: the bench drives its own sync Playwright, which refuses a thread where another
    # test's Playwright left an event loop running)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        rows = pool.submit(run_browser, harness.BROWSER, [good, broken], harness.Settings(quick=True), str(tmp_path),
                           harness.rows_for, harness.unavailable, logs.append).result()
    cell = {(r["engine"], r["model"], r["metric"]): r for r in rows}
    assert len(rows) == len(cell) == len(harness.BROWSER) * 2 * 2, rows
    for engine in harness.BROWSER:
        for metric in ("latency", "first result"):
            r = cell[(engine, "tiny", metric)]
            assert r["error"] is None, (engine, metric, r["error"], logs)
            assert isinstance(r["median"], float) and 0 < r["min"] <= r["median"] <= r["max"], r
        for metric in ("latency", "first result"):
            r = cell[(engine, "broken", metric)]
            assert r["median"] is None and r["error"], r
            # webinfer cannot fetch the missing shard; onnxruntime-web (and the CPU path over it) cannot parse the file
            want = "shard-000.bin" if engine == "webinfer-pyodide" else "session"
            assert want in r["error"], r
    assert cell[("ort-web-wasm", "tiny", "latency")]["adapter"].startswith("wasm")
    assert cell[("webinfer-pyodide", "tiny", "first result")]["samples"] == 1


def test_bench_page_that_cannot_load_says_why(tmp_path, browser):
    """The bench site's files are real files (``webinfer serve`` follows no link out of a site); a site whose
    Pyodide is a link out of it gives a cell naming the 404, at once rather than after a time-out."""
    import shutil

    from benchmarks.browser import build_site, run_page
    from webinfer.serve import serve_in_thread
    from webinfer.web import pyodide_dir

    site = tmp_path / "site"
    assert build_site(str(site), []) == {}
    assert not [p for p in site.rglob("*") if p.is_symlink()]
    shutil.rmtree(site / "pyodide")
    (site / "pyodide").symlink_to(pyodide_dir())
    server, url = serve_in_thread(str(site))
    try:
        result = run_page(browser, url, "benchOrt", [{}, "wasm"], 30, log=lambda line: None)
    finally:
        server.shutdown()
        server.server_close()
    assert result == {"error": "the bench page did not load: 404 for /pyodide/pyodide.mjs"}


def test_cpu_path_paired_with_wasm(tmp_path):
    """cpu-vs-wasm: webinfer's CPU path and onnxruntime-web wasm in one page, in turns: one ratio per round (the
    CPU path's outputs checked against onnxruntime CPU's by the harness), its median and spread in the cell; a
    model the engines cannot load is a cell that says why."""
    onnx_path = tiny_model(tmp_path / "tiny.onnx")
    build(onnx_path, str(tmp_path / "tiny.wi"), cpu=True)
    x = np.random.default_rng(4).standard_normal((4, 16)).astype(np.float32)
    good = S.ModelSpec("tiny", onnx_path, {"x": x}, artifact=str(tmp_path / "tiny.wi"))
    build(onnx_path, str(tmp_path / "nocpu.wi"))  # (no CPU model: the pair cannot run)
    nocpu = S.ModelSpec("nocpu", onnx_path, {"x": x}, artifact=str(tmp_path / "nocpu.wi"))
    S.prepare(good)
    S.prepare(nocpu)
    settings = harness.Settings(quick=True)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        rows = pool.submit(run_browser, harness.PAIRED, [good, nocpu], settings, str(tmp_path), harness.rows_for,
                           harness.unavailable, lambda line: None).result()
    cell = {(r["engine"], r["model"], r["metric"]): r for r in rows}
    assert set(cell) == {("cpu-vs-wasm", "tiny", "latency"), ("cpu-vs-wasm", "nocpu", "latency")}, rows
    r = cell[("cpu-vs-wasm", "tiny", "latency")]
    assert r["error"] is None, r
    assert r["unit"] == "x" and r["samples"] == settings.pair_rounds and 0 < r["min"] <= r["median"] <= r["max"], r
    assert "CPU model" in cell[("cpu-vs-wasm", "nocpu", "latency")]["error"]
