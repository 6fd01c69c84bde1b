"""webinfer bench's harness on a tiny model with two native engines: the JSON rows (steady state and first
result), the markdown table, the chart, a wrong output (an artifact built from other weights) reported as that
cell's error, and failures (no reference, a worker that cannot start, a browser site that cannot be built)
that become cells saying why instead of ending the run."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from webinfer.build import build

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks import harness  # noqa: E402
from benchmarks import spec as S  # noqa: E402

ROW_KEYS = {"engine", "where", "model", "metric", "median", "min", "max", "unit", "error"}


def tiny_model(path, scale: float) -> str:
    w = (np.arange(32, dtype=np.float32).reshape(8, 4) / 32 - 0.5) * scale
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_bench_rows_table_and_wrong_output(tmp_path):
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)
    good = S.ModelSpec("tiny", tiny_model(tmp_path / "tiny.onnx", 1.0), {"x": x})
    # Same graph, other weights: webinfer runs it fine but its output is not ORT CPU's on tiny.onnx.
    other = tiny_model(tmp_path / "other.onnx", -2.0)
    build(other, str(tmp_path / "other.wi"))
    wrong = S.ModelSpec("tiny-wrong", good.onnx, {"x": x}, artifact=str(tmp_path / "other.wi"))
    out = tmp_path / "out"
    rows = harness.run(str(out), quick=True, engines=["webinfer", "ort-cpu"], specs=[good, wrong],
                       kernels=False, log=lambda line: None)

    saved = json.loads((out / "bench.json").read_text())
    assert saved == rows and len(rows) == 8  # 2 engines x 2 models x (latency, first result)
    assert all(ROW_KEYS <= set(r) for r in rows)
    cell = {(r["engine"], r["model"]): r for r in rows if r["metric"] == "latency"}
    first = {(r["engine"], r["model"]): r for r in rows if r["metric"] == "first result"}
    for engine in ("webinfer", "ort-cpu"):
        r = cell[(engine, "tiny")]
        assert r["error"] is None, r
        assert r["unit"] == "ms" and 0 < r["min"] <= r["median"] <= r["max"]
        f = first[(engine, "tiny")]  # one sample: making the session plus its first run
        assert f["error"] is None and f["unit"] == "ms" and f["samples"] == 1 and f["median"] > 0, f
    assert cell[("ort-cpu", "tiny-wrong")]["error"] is None
    bad = cell[("webinfer", "tiny-wrong")]
    assert bad["median"] is None and "differs from ORT CPU" in bad["error"]
    assert "differs from ORT CPU" in first[("webinfer", "tiny-wrong")]["error"]

    table = (out / "bench.md").read_text().splitlines()
    header = next(line for line in table if line.startswith("| model"))
    assert "webinfer [" in header and "onnxruntime CPU" in header  # the column names the adapter
    body = [line for line in table if line.startswith("| tiny")]
    assert len(body) == 4 and " ms (" in body[0] and "| tiny | first result | " in body[1]
    assert "differs from ORT CPU" in body[2] and "differs from ORT CPU" in body[3]
    assert (out / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_check_outputs_flags_a_small_relative_error():
    ref = np.array([1.0, -2.0, 4.0], np.float32)
    spec = S.ModelSpec("m", "unused.onnx", reference={"y": ref})

    def enc(a):
        return {"y": {"b64": __import__("base64").b64encode(np.asarray(a, np.float32).tobytes()).decode()}}

    assert S.check_outputs(spec, enc(ref + 1e-4)) is None
    assert "differs" in S.check_outputs(spec, enc(ref + np.array([0, 0, 0.05])))
    assert "missing" in S.check_outputs(spec, {})


def test_baseline_revision_and_forced_class(tmp_path, monkeypatch):
    """--baseline REV: webinfer as of a commit (here HEAD, unpacked by git archive and building the model with
    its own compiler) runs beside this checkout in the same run; webinfer-gpu forces the gpu class's program."""
    monkeypatch.setattr(S, "artifact_dir", lambda: str(tmp_path / "cache"))
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)
    spec = S.ModelSpec("tiny", tiny_model(tmp_path / "tiny.onnx", 1.0), {"x": x})
    out = tmp_path / "out"
    logs: list[str] = []
    rows = harness.run(str(out), quick=True, engines=["webinfer", "webinfer-gpu"], specs=[spec], kernels=False,
                       log=logs.append, baseline="HEAD")
    cell = {r["engine"]: r for r in rows}
    # the workers take turns, BASELINE_ROUNDS passes in alternating order, and each cell pools its passes
    passes = [line.split(":")[0] for line in logs if line.startswith("webinfer") and line.endswith(" s")]
    n = len(passes) // harness.BASELINE_ROUNDS
    assert n == 4 and len(passes) == 4 * harness.BASELINE_ROUNDS and passes[n:2 * n] == passes[:n][::-1], passes
    assert set(cell) == {"webinfer", "webinfer@HEAD", "webinfer-gpu", "webinfer-gpu@HEAD"}
    for engine in ("webinfer", "webinfer@HEAD", "webinfer-gpu"):
        assert cell[engine]["error"] is None, cell[engine]
    # lavapipe is a cpu adapter: a software class (software-subgroups where it has subgroups) unless forced
    assert "gpu class" in cell["webinfer-gpu"]["adapter"] and cell["webinfer"]["adapter"].endswith(
        ("software class", "software-subgroups class"))
    (built,) = (tmp_path / "cache").glob("baseline-*/tiny/manifest.json")  # by the baseline's own build()
    assert any(line.startswith("webinfer@HEAD: tiny: artifact ready") for line in logs), logs  # before the passes
    assert json.loads(built.read_text())["producer"].startswith("webinfer")
    text = (out / "bench.md").read_text()
    assert "- webinfer vs webinfer@HEAD: tiny latency: " in text
    with __import__("pytest").raises(Exception, match="not a commit"):
        harness.run(str(out), engines=["webinfer"], specs=[], baseline="no-such-rev", log=lambda line: None)


def test_roofline_work_and_report_section(tmp_path):
    from benchmarks.report import markdown
    from benchmarks.roofline import model_work

    x = np.zeros((2, 8), np.float32)
    # y = relu(x @ w): 2 x 4 outputs of 8 multiply-adds; bytes: w (8 x 4), x (2 x 8), y (2 x 4) in f32
    assert model_work(tiny_model(tmp_path / "tiny.onnx", 1.0), {"x": x}) == {"flops": 2 * 2 * 4 * 8,
                                                                             "bytes": 4 * (32 + 16 + 8)}
    conv = helper.make_graph([helper.make_node("Conv", ["img", "k"], ["out"], group=2)], "conv",
                             [helper.make_tensor_value_info("img", TensorProto.FLOAT, ["n", 4, 6, 6])],
                             [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                             [numpy_helper.from_array(np.ones((6, 2, 3, 3), np.float32), "k")])
    onnx.save(helper.make_model(conv, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "conv.onnx"))
    img = np.zeros((1, 4, 6, 6), np.float32)  # out [1, 6, 4, 4], each of 2 channels x 3 x 3 taps
    assert model_work(str(tmp_path / "conv.onnx"), {"img": img})["flops"] == 2 * 6 * 16 * 18

    def row(model, metric, unit, median, **extra):
        return {"engine": "webinfer", "where": "native", "model": model, "metric": metric, "unit": unit,
                "median": median, "min": median, "max": median, "error": None, "adapter": "", **extra}

    rows = [row("kernels", "peak FMA", "GFLOP/s", 1.0), row("kernels", "peak copy", "GB/s", 1.0),
            row("m", "latency", "ms", 8.0, work={"flops": 1e6, "bytes": 4e6})]  # 1 ms of FMA, 4 ms of copy
    assert "m latency: 50.0 % (copy-bound)" in markdown(rows, 1.0, {})


def test_failures_become_cells(tmp_path, monkeypatch):
    """A model onnxruntime CPU cannot load, a native worker that cannot start and a browser site that cannot be
    built each leave cells that say why; the run still writes its table."""
    from benchmarks import browser

    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)
    good = S.ModelSpec("tiny", tiny_model(tmp_path / "tiny.onnx", 1.0), {"x": x})
    (tmp_path / "garbage.onnx").write_bytes(b"not an onnx file")
    garbage = S.ModelSpec("garbage", str(tmp_path / "garbage.onnx"), {"x": x})
    monkeypatch.setattr(S, "artifact_dir", lambda: str(tmp_path / "cache"))
    real_command = harness.worker_command

    def command(engine, *args, **kwargs):
        cmd, env = real_command(engine, *args, **kwargs)
        return ([str(tmp_path / "no-such-python")] + cmd[1:] if engine == "ort-cpu" else cmd), env

    monkeypatch.setattr(harness, "worker_command", command)

    class NoPyodide(Exception):
        pass

    def no_pyodide(*args):
        raise NoPyodide("Pyodide 0.0 is not available")

    monkeypatch.setattr(browser, "pyodide_dir", no_pyodide)
    monkeypatch.setattr(browser, "missing_parts", lambda: None)
    out = tmp_path / "out"
    rows = harness.run(str(out), quick=True, engines=["webinfer", "ort-cpu", "ort-web-wasm"], specs=[good, garbage],
                       kernels=False, log=lambda line: None)
    cell = {(r["engine"], r["model"], r["metric"]): r for r in rows}
    assert len(rows) == len(cell) == 3 * 2 * 2
    for metric in ("latency", "first result"):
        assert cell[("webinfer", "tiny", metric)]["error"] is None
        for engine in ("webinfer", "ort-cpu", "ort-web-wasm"):
            assert cell[(engine, "garbage", metric)]["error"].startswith("no reference: onnxruntime CPU failed")
        assert cell[("ort-cpu", "tiny", metric)]["error"].startswith("worker did not start: FileNotFoundError")
        why = cell[("ort-web-wasm", "tiny", metric)]["error"]
        assert why == "not available: the bench site could not be built: NoPyodide: Pyodide 0.0 is not available"
    assert "worker did not start" in (out / "bench.md").read_text()


def test_cli_bench_default_out_is_build(tmp_path, monkeypatch, capsys):
    """Without --out the table goes to the checkout's build/bench, never the tracked bench-results/."""
    import benchmarks.harness
    from webinfer import cli
    from webinfer.errors import WebinferError

    def where(out, **kwargs):  # the harness itself is tested above; here only where it is told to write
        raise WebinferError(f"would write to {out}")

    monkeypatch.setattr(benchmarks.harness, "run", where)
    root = os.path.dirname(os.path.dirname(os.path.abspath(cli.__file__)))
    assert cli.main(["bench", "--quick"]) == 2
    assert capsys.readouterr().err.strip() == f"webinfer: error: would write to {os.path.join(root, 'build', 'bench')}"
    assert cli.main(["bench", "--out", str(tmp_path / "here")]) == 2
    assert capsys.readouterr().err.strip().endswith(f"would write to {tmp_path / 'here'}")


def test_llm_rows_prefill_decode_and_first_result(tmp_path, monkeypatch):
    """A tiny random Llama (exported like SmolLM2): onnxruntime CPU's teacher-forced loop (runner.time_llm) and
    webinfer's Generator (runner.time_generator) each give prefill, decode and first-result cells, their
    logits / greedy tokens checked against onnxruntime CPU's."""
    import tiny_llama

    monkeypatch.setattr(S, "artifact_dir", lambda: str(tmp_path / "cache"))
    folder = tiny_llama.tiny_llama(tiny_llama.TINY)
    spec = S.ModelSpec("tiny-llama", str(folder / "model.onnx"),
                       llm={"prompt": [5, 17, 99, 3, 250, 42, 7, 300], "decode_tokens": 4})
    rows = harness.run(str(tmp_path / "out"), quick=True, engines=["webinfer", "ort-cpu"], specs=[spec],
                       kernels=False, log=lambda line: None)
    cell = {(r["engine"], r["metric"]): r for r in rows}
    assert len(rows) == len(cell) == 2 * 3
    for engine in ("webinfer", "ort-cpu"):
        for metric, unit in (("prefill 8 tok", "ms"), ("decode 4 tok", "tok/s"), ("first result", "ms")):
            r = cell[(engine, metric)]
            assert r["error"] is None and r["unit"] == unit and r["median"] > 0, r
