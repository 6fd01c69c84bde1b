"""The GPU kernel classes' f32 variants (gpu, gpu-subgroups, gpu-dp4a) run in Chromium: Dawn and Tint on
SwiftShader, which has subgroups and the packed_4x8_integer_dot_product language feature but no shader-f16
(gpu-f16 is covered natively). One small artifact per kernel family and class, built here, run by the
conformance page (web/conformance: Pyodide + BrowserDevice), outputs compared with onnxruntime or numpy.
Tiled GEMM, f32 GEMV, conv and flash attention run under gpu only: gpu-subgroups and gpu-dp4a build the same
shaders for them (tests/test_options.py::test_each_class_builds_its_own_variants checks it). The matmul case
also runs under software-subgroups, the one software class with subgroup builtins.

    pytest -m browser tests/browser/test_gpu_classes.py
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from conformance_site import SITE_TEMPLATE, decode, encode
from llm.conftest import tiny_llama_dir, tokenizer_dir  # noqa: F401  (fixtures: the tiny Llama export)
from onnx import TensorProto, helper, numpy_helper
from quantref import dp4a_reference, unpack_reference

import webinfer
from webinfer.graph.quantize import quantize_nk
from webinfer.serve import serve_in_thread

pytestmark = pytest.mark.browser
CLASSES = ("gpu", "gpu-subgroups", "gpu-dp4a")
F32_ONLY = CLASSES[:2]  # gpu-dp4a differs from gpu-subgroups only in the int8/int4 GEMVs
SHARED = ("matmul", "gemv", "conv", "attention")  # no subgroups in these families: gpu's shaders under every class
# ... but software-subgroups' matmul broadcasts A rows over a subgroup of 8 (its plain loop elsewhere): Tint must
# take its `diagnostic(off, subgroup_uniformity)` and the subgroup builtins, and the check must hold on SwiftShader
SOFTWARE_CASES = {"matmul": ("gpu", "software-subgroups")}
rng = np.random.default_rng(11)
MAX_SEQ = 128  # the tiny Llama's KV cache (and penalty_ids) length
NO_BIAS = {"logit_bias": np.zeros(512, np.float32), "logprobs_k": np.array([0xFFFFFFFF], np.uint32)}  # (512: vocab)


def f32(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def _model(nodes, inputs: dict, outputs: list[str], inits: dict | None = None, opset: int = 18):
    g = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for n, v in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in (inits or {}).items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def onnx_cases() -> dict:
    """name -> model: each exercises GPU-class kernels (tiled GEMM with strided/vec4/im2col sources, rows per
    workgroup with subgroup partials, flash attention)."""
    x700, x600 = f32(3, 700), f32(2, 600)
    rows = [helper.make_node("Softmax", ["x"], ["sm"]), helper.make_node("ArgMax", ["x"], ["am"], axis=1),
            helper.make_node("ReduceMax", ["x", "ax"], ["rm"]), helper.make_node("LogSoftmax", ["x"], ["ls"])]
    return {
        "matmul": _model([helper.make_node("MatMul", ["a", "b"], ["y"]),
                           helper.make_node("Gemm", ["a2", "w", "c"], ["z"], transB=1, alpha=0.5)],
                          {"a": f32(65, 70), "b": f32(70, 67), "a2": f32(5, 12)}, ["y", "z"],
                          {"w": f32(20, 12), "c": f32(20)}),
        # one row times a constant f32 weight: the K-major decode GEMV (vec4 columns, and odd N)
        "gemv": _model([helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("MatMul", ["x", "w3"], ["z"])],
                        {"x": f32(1, 600)}, ["y", "z"], {"w": f32(600, 576), "w3": f32(600, 37)}),
        "conv": _model([helper.make_node("Conv", ["x", "w", "b"], ["c"], group=2, pads=[1, 0, 2, 1], strides=[2, 1]),
                         helper.make_node("HardSwish", ["c"], ["y"]),
                         helper.make_node("ConvTranspose", ["y", "wt"], ["t"], strides=[2, 2]),
                         helper.make_node("Conv", ["t", "wd"], ["z"], group=20, pads=[1, 1, 1, 1])],
                        {"x": f32(1, 8, 9, 7)}, ["z"],
                        {"w": f32(32, 4, 3, 3), "b": f32(32), "wt": f32(32, 20, 3, 3), "wd": f32(20, 1, 3, 3)}),
        "rows": _model(rows + [helper.make_node("LayerNormalization", ["x6", "s", "bb"], ["ln"])],
                        {"x": x700, "x6": x600}, ["sm", "am", "rm", "ls", "ln"],
                        {"ax": np.array([1], np.int64), "s": f32(600), "bb": f32(600)}),
        "attention": _model([helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=1)],
                             {"q": f32(1, 4, 70, 64), "k": f32(1, 2, 70, 64), "v": f32(1, 2, 70, 64)}, ["y"],
                             opset=23),
    }


def quant_case(fmt: str, k: int = 600, n: int = 40):
    """MatMul with a weight packed as ``fmt``: built with rows fixed at one it runs the decode GEMV (dp4a's on
    int8 activations under gpu-dp4a), with symbolic rows the tiled GEMM (outside a generation build a symbolic
    row count gets no GEMV step). Reference: the documented layout, unpacked."""
    w = rng.normal(size=(k, n)).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "q",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", n])],
                          [numpy_helper.from_array(w, "w")])
    words, params = quantize_nk(w.T, fmt)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), unpack_reference(words, params, fmt, k).T, params


def llama_runs(model_path: Path, n_prompt: int = 70):
    """A prefill of n_prompt ids then one decode step (the KV cache stays in the session), as Generator feeds
    them; and onnxruntime's last-position logits for both, from the whole prefix without a cache."""
    ids = [int(i) for i in rng.integers(3, 512, n_prompt + 1)]
    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    past = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32)
            for i in sess.get_inputs() if i.name.startswith("past_key_values.")}
    runs, want = [], []
    for step_ids, pos in ((ids[:n_prompt], 0), (ids[n_prompt:], n_prompt)):
        n = pos + len(step_ids)
        feeds = {**NO_BIAS, "input_ids": np.array([step_ids], np.int64), "attention_mask": np.ones((1, n), np.int64),
                 "position_ids": np.arange(pos, n, dtype=np.int64)[None],
                 "sampling_params": np.array([0.0, 0.0, 1.0, 1.0], np.float32),
                 "sampling_seed": np.array([0, 0], np.uint32), "penalty_ids": np.full((MAX_SEQ,), -1, np.int32),
                 "verify_ids": np.full((1,), -1, np.int32),

                 "token_mask": np.full((512 // 32,), 0xFFFFFFFF, np.uint32)}  # every token allowed
        runs.append((feeds, {"past_sequence": pos}))
        full = {"input_ids": np.array([ids[:n]], np.int64), "attention_mask": np.ones((1, n), np.int64),
                "position_ids": np.arange(n, dtype=np.int64)[None], **past}
        want.append(sess.run(["logits"], full)[0][0, -1])
    return runs, want


def _case(site: str, name: str, artifact: str, runs: list, outputs: list | None = None) -> dict:
    dest = os.path.join(site, "cases", name)
    shutil.copytree(artifact, dest)
    inputs = [i["name"] for i in json.loads(Path(dest, "manifest.json").read_text())["inputs"]]
    return {"name": name, "artifact": f"cases/{name}/",
            "runs": [{"inputs": {k: encode(v) for k, v in feeds.items() if k in inputs}, "dims": dims,
                      "outputs": outputs} for feeds, dims in runs]}


@pytest.fixture(scope="module")
def site_cases(tmp_path_factory, webinfer_wheel, tiny_llama_dir):  # noqa: F811
    """Build every case for every class natively; the expected outputs stay here."""
    from webinfer.web import copy_pyodide, pyodide_dir

    root = tmp_path_factory.mktemp("gpu-classes")
    site = str(root / "site")
    os.makedirs(os.path.join(site, "wheels"))
    for name in ("index.html", "boot.mjs", "main.py"):
        shutil.copyfile(SITE_TEMPLATE / name, os.path.join(site, name))
    copy_pyodide(pyodide_dir(), site)
    shutil.copy(webinfer_wheel, os.path.join(site, "wheels"))
    cases, expected = [], {}
    for case, model in onnx_cases().items():
        feeds = _feeds_of(model)
        want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
        for cls in SOFTWARE_CASES.get(case, ("gpu",)) if case in SHARED else F32_ONLY:
            art = str(root / f"{case}-{cls}")
            webinfer.build(model, art, target=cls)
            cases.append(_case(site, f"{case}-{cls}", art, [(feeds, None)]))
            expected[f"{case}-{cls}"] = [("ref", w) for w in want]
    for fmt in ("int8", "int4"):
        model, ref_w, params = quant_case(fmt)
        x1, x5 = f32(1, 600), f32(5, 600)
        for cls in CLASSES:
            gemv, gemm = str(root / f"q{fmt}-gemv-{cls}"), str(root / f"q{fmt}-{cls}")
            webinfer.build(model, gemv, target=cls, quantize=fmt, dims={"rows": 1})
            webinfer.build(model, gemm, target=cls, quantize=fmt)
            cases.append(_case(site, f"q{fmt}-gemv-{cls}", gemv, [({"x": x1}, None)]))
            cases.append(_case(site, f"q{fmt}-{cls}", gemm, [({"x": x5}, None)]))
            one = dp4a_reference(x1[0], ref_w, params, fmt)[None] if cls == "gpu-dp4a" else x1.astype(np.float64) @ ref_w
            expected[f"q{fmt}-gemv-{cls}"] = [("quant", one)]
            expected[f"q{fmt}-{cls}"] = [("quant", x5.astype(np.float64) @ ref_w)]
    runs, want = llama_runs(tiny_llama_dir / "model.onnx")
    for cls in F32_ONLY:  # (gpu-dp4a's own kernels are the quantized GEMVs above)
        art = str(root / f"llama-{cls}")
        webinfer.build(str(tiny_llama_dir / "model.onnx"), art, max_seq=MAX_SEQ, target=cls)
        cases.append(_case(site, f"llama-{cls}", art, runs, outputs=["logits"]))
        expected[f"llama-{cls}"] = [("logits", w) for w in want]
    with open(os.path.join(site, "site.json"), "w") as f:
        json.dump({"wheel": f"wheels/{os.path.basename(webinfer_wheel)}", "cases": cases}, f)
    return site, expected


def _feeds_of(model: onnx.ModelProto) -> dict:
    """The graph inputs' values: made once per case (a fresh draw per model)."""
    out = {}
    for vi in model.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        out[vi.name] = f32(*shape)
    return out


@pytest.fixture(scope="module")
def page_results(browser, site_cases):
    site, expected = site_cases
    server, url = serve_in_thread(site)
    page = browser.new_page()
    console, requests = [], []
    page.on("console", lambda m: console.append(f"[{m.type}] {m.text}"))
    page.on("request", lambda r: requests.append(r.url))
    try:
        t0 = time.perf_counter()
        page.goto(url + "index.html")
        page.wait_for_selector("#results[data-done]", state="attached", timeout=600_000)
        el = page.locator("#results")
        assert el.get_attribute("data-error") is None, el.get_attribute("data-error") + "\n".join(console[-30:])
        result = json.loads(el.get_attribute("data-results"))
        result["page_s"] = time.perf_counter() - t0
    finally:
        page.close()
        server.shutdown()
        server.server_close()
    assert {urlparse(u).hostname for u in requests if not u.startswith(("data:", "blob:"))} == {"127.0.0.1"}
    return result, expected


def _check(kind: str, got: np.ndarray, want: np.ndarray) -> None:
    if kind == "ref":
        if want.dtype.kind in "iub":
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
    elif kind == "quant":  # K = 600: products of ~25 in magnitude
        np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-4, atol=3e-3)
    else:  # last-position logits of the tiny Llama vs onnxruntime fp32, relative to the largest logit: 5.7e-4
        # in Chromium while the rotary tables took SwiftShader's built-in sin/cos (1.9e-4 off), 7e-6 natively;
        # with our own sin/cos (elementwise_ops.py sincos_f) about as natively
        got = got.reshape(-1)[-want.size:]
        off = np.abs(got - want).max() / np.abs(want).max()
        assert off <= 3e-5, f"logits {off:.2e} of the peak off onnxruntime's"
        assert got.argmax() == want.argmax()


@pytest.mark.parametrize("name", [f"{case}-gpu" for case in SHARED] + ["matmul-software-subgroups"] +
                         [f"rows-{cls}" for cls in F32_ONLY] +
                         [f"{case}-{cls}" for case in ("qint8-gemv", "qint8", "qint4-gemv", "qint4") for cls in CLASSES] +
                         [f"llama-{cls}" for cls in F32_ONLY])
def test_gpu_class_in_chromium(page_results, name):
    result, expected = page_results
    got = result["cases"][name]
    assert "error" not in got, f"{name} in Chromium ({result['adapter']}): {got.get('error')}"
    outs = [decode(o) for o in got["outputs"]]
    assert len(outs) == len(expected[name])
    for (kind, want), g in zip(expected[name], outs):
        _check(kind, g, want)


def test_adapter_is_swiftshader(page_results, capsys):
    result, _ = page_results
    assert "swiftshader" in result["adapter"].lower(), result["adapter"]
    slowest = sorted(result["cases"].items(), key=lambda kv: -kv[1].get("ms", 0))[:6]
    with capsys.disabled():
        print(f"\ngpu classes in Chromium: {len(result['cases'])} cases on {result['adapter']}, page "
              f"{result['page_s']:.0f} s (Pyodide {result['load_pyodide_ms'] / 1000:.1f} s); slowest: "
              + ", ".join(f"{name} {case.get('ms', 0) / 1000:.1f} s" for name, case in slowest))
