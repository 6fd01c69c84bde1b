"""The page's JS API returns a classic-ML classifier's outputs as Python's InferenceSession and onnxruntime do:
string labels as strings and ZipMap's probabilities as one {label: probability} object per row (integer labels as
the objects' string keys), not the raw tensors the GPU computes them in. Compared with onnxruntime CPU."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import compose, helper

pytestmark = pytest.mark.browser
sklearn = pytest.importorskip("sklearn")
skl2onnx = pytest.importorskip("skl2onnx")
ML = "ai.onnx.ml"


def classifiers(X, y) -> onnx.ModelProto:
    """A logistic regression with string classes and a forest with integer ones, ZipMap kept (skl2onnx's
    default), side by side on one input X."""
    from sklearn import ensemble, linear_model

    warnings.filterwarnings("ignore", category=FutureWarning)
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    models = [linear_model.LogisticRegression(max_iter=500).fit(X, names),
              ensemble.RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(X, y)]
    nodes, inits, outputs = [], [], []
    for i, m in enumerate(models):
        onx = compose.add_prefix(skl2onnx.to_onnx(m, X[:1], target_opset={"": 18, ML: 3}), f"m{i}_")
        for n in onx.graph.node:
            n.input[:] = ["X" if v == f"m{i}_X" else v for v in n.input]
        nodes += onx.graph.node
        inits += onx.graph.initializer
        outputs += onx.graph.output
    g = helper.make_graph(nodes, "ml", [helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT, [None, 4])],
                          outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(ML, 3)])


@pytest.mark.parametrize("path", ["gpu", "cpu"])  # (cpu: onnxruntime-web's wasm backend on the CPU model)
def test_zipmap_and_string_labels_in_the_page(page, tmp_path, webinfer_wheel, path):
    from sklearn.datasets import load_iris

    from webinfer.build import build
    from webinfer.bundle import bundle
    from webinfer.serve import serve_in_thread

    X, y = load_iris(return_X_y=True)
    X = X.astype(np.float32)
    model = classifiers(X, y)
    onnx_path = str(tmp_path / "cls.onnx")
    onnx.save(model, onnx_path)
    build(onnx_path, str(tmp_path / "cls.wi"), cpu=True)
    rows = X[np.linspace(0, len(X) - 1, 9).astype(int)]
    want = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"]).run(None, {"X": rows})
    names = [o.name for o in model.graph.output]
    site = tmp_path / "site"
    bundle(str(tmp_path / "cls.wi"), str(site), wheel=webinfer_wheel)
    server, url = serve_in_thread(str(site))
    try:
        page.goto(url)
        got = page.evaluate("""async ([rows, path]) => {
            const webinfer = await import("./assets/webinfer.mjs");
            const s = await webinfer.load("model/artifact/", { path });
            if (s.path !== path) throw new Error(`asked for the ${path} path, got ${s.path}`);
            const out = await s.run({ X: { data: rows.flat(), dims: [rows.length, 4] } });
            const bad = await s.run({ X: { data: [1, 2, 3], dims: [1, 3] } }).then(() => "ran", (e) => e.message);
            return { bad, ...Object.fromEntries(Object.entries(out).map(([k, v]) =>
                [k, Array.isArray(v) ? v : { tensor: Array.from(v.data, Number) }])) }; }""", [rows.tolist(), path])
        page.goto(f"{url}model/?path={path}")  # the generic page shows them too (it runs on ones)
        page.wait_for_selector("#result[data-done]", timeout=120_000)
        shown = json.loads(page.locator("#result").get_attribute("data-outputs"))
    finally:
        server.shutdown()
        server.server_close()
    ones = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"]).run(
        None, {"X": np.ones((1, 4), np.float32)})
    for name, w in zip(names, ones):
        assert shown[name]["dtype"] == "list" if isinstance(w, list) or w.dtype == object else w.dtype.name, name
        head = shown[name]["head"]
        if isinstance(w, list):
            np.testing.assert_allclose([head[0][str(k)] for k in w[0]], list(w[0].values()), rtol=1e-5, atol=1e-6)
        else:
            assert head == w.tolist(), name
    # a feed of the wrong size: the same one line on both paths (onnxruntime-web's own is several)
    assert re.fullmatch(r"input X expects dims \[\w+,4\], got \[1,3\]", got.pop("bad"))
    assert set(got) == set(names)
    for name, w in zip(names, want):
        g = got[name]
        if isinstance(w, list):  # ZipMap: a list of {label: probability}, keys as JavaScript has them
            assert isinstance(g, list) and len(g) == len(w), name
            for grow, wrow in zip(g, w):
                assert sorted(grow) == sorted(str(k) for k in wrow), name
                np.testing.assert_allclose([grow[str(k)] for k in wrow], list(wrow.values()), rtol=1e-5, atol=1e-6,
                                           err_msg=name)
        else:  # labels: strings for the string classes, the int64 tensor for the integer ones
            assert (g if w.dtype == object else g["tensor"]) == w.tolist(), name
