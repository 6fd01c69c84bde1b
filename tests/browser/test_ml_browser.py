"""Classic-ML kernels (ai.onnx.ml) in Chromium (Dawn/Tint/SwiftShader through Pyodide): one artifact holding a
scaler + logistic regression, a random forest, a gradient-boosted regressor, an RBF SVC (skl2onnx conversions of
fitted scikit-learn models; an SVC with probabilities) and the feature ops (LabelEncoder, Binarizer, Imputer, ArrayFeatureExtractor,
OneHotEncoder, Normalizer), run in the page and compared with onnxruntime CPU: labels exactly, values 1e-5."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, compose, helper
from smoke_site import build_smoke_site, run_smoke_page

from webinfer.build import build

pytestmark = pytest.mark.browser
sklearn = pytest.importorskip("sklearn")
skl2onnx = pytest.importorskip("skl2onnx")
ML = "ai.onnx.ml"


def _fitted_models(X, y, yr):
    from sklearn import ensemble, linear_model, pipeline, preprocessing, svm

    warnings.filterwarnings("ignore", category=FutureWarning)  # (scikit-learn 1.9 deprecates probability=True)
    return [pipeline.make_pipeline(preprocessing.StandardScaler(), linear_model.LogisticRegression()).fit(X, y),
            ensemble.RandomForestClassifier(n_estimators=4, max_depth=4, random_state=0).fit(X, y),
            ensemble.GradientBoostingRegressor(n_estimators=5, max_depth=3, random_state=0).fit(X, yr),
            svm.SVC(kernel="rbf").fit(X, y), svm.SVC(kernel="rbf", probability=True, random_state=0).fit(X, y)]


def ml_model(X, y, yr) -> onnx.ModelProto:
    """The converted models side by side on one input X, plus the feature ops on X and on the forest's label."""
    nodes, inits, outputs = [], [], []
    for i, m in enumerate(_fitted_models(X, y, yr)):
        options = {id(m): {"zipmap": False}} if i != 2 else None  # (raw tensors: the smoke page encodes those)
        onx = compose.add_prefix(skl2onnx.to_onnx(m, X[:1], target_opset={"": 18, ML: 3}, options=options), f"m{i}_")
        for n in onx.graph.node:
            n.input[:] = ["X" if v == f"m{i}_X" else v for v in n.input]
        nodes += onx.graph.node
        inits += onx.graph.initializer
        outputs += onx.graph.output
    nodes += [helper.make_node("LabelEncoder", ["m1_label"], ["encoded"], domain=ML, keys_int64s=[0, 1, 2],
                               values_floats=[0.5, -1.0, 2.5], default_float=9.0),
              helper.make_node("Imputer", ["Xn"], ["imputed"], domain=ML, imputed_value_floats=[-1.0],
                               replaced_value_float=float("nan")),
              helper.make_node("Binarizer", ["imputed"], ["binary"], domain=ML, threshold=3.0),
              helper.make_node("ArrayFeatureExtractor", ["X", "cols"], ["picked"], domain=ML),
              helper.make_node("OneHotEncoder", ["picked"], ["onehot"], domain=ML, cats_int64s=[1, 2, 3, 4, 5, 6, 7]),
              helper.make_node("Normalizer", ["imputed"], ["l2"], domain=ML, norm="L2")]
    inits.append(helper.make_tensor("cols", TensorProto.INT64, [2], [0, 2]))
    outputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                for n in ("encoded", "binary", "imputed", "picked", "onehot", "l2")]
    g = helper.make_graph(nodes, "ml", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [None, X.shape[1]])
                                        for n in ("X", "Xn")], outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(ML, 3)])


def test_classic_ml_in_chromium(page, tmp_path, webinfer_wheel):
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    X = X.astype(np.float32)
    model = ml_model(X, y, X[:, 3] * 2 + X[:, 0])
    rows = X[np.linspace(0, len(X) - 1, 20).astype(int)]
    holes = rows.copy()
    holes[3, 1] = holes[7, 0] = np.nan  # the imputer's input (the Binarizer after it: onnxruntime's refuses NaN;
    # NaN through exp() and clamp() is the GPU's choice in WGSL, so the classifiers see none)
    feeds = {"X": rows, "Xn": holes}
    path = str(tmp_path / "ml.onnx")
    onnx.save(model, path)
    art = str(tmp_path / "ml.wi")
    build(path, art)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    site = build_smoke_site(art, str(tmp_path / "site"), [feeds], wheel=webinfer_wheel)
    got = run_smoke_page(page, site)["runs"][0]
    for out, w in zip(model.graph.output, want):
        g = got[out.name]
        assert g.shape == w.shape, out.name
        if w.dtype.kind in "iu":
            assert g.tolist() == w.tolist(), out.name
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * max(1.0, float(np.nanmax(np.abs(w)))),
                                       err_msg=out.name)
