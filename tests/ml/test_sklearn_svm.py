"""scikit-learn's support vector machines (SVC with probability=False: skl2onnx's SVMClassifier plus its ONNX ops
for the one-vs-rest scores; SVR) built by webinfer and compared with onnxruntime CPU."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")
pytest.importorskip("skl2onnx")

from ml_ref import check  # noqa: E402
from skl2onnx import to_onnx  # noqa: E402
from sklearn import datasets, svm  # noqa: E402

# (unscaled, a linear SVC's decisions there are sums of +-1e6 terms: onnxruntime's own f32 values differ from
# scikit-learn's double ones by 0.05, and from webinfer's by as much)

OPSETS = {"": 18, "ai.onnx.ml": 3}


def _data(name: str, features: int | None = None):
    X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    X = X[:, :features] if features else X
    return X.astype(np.float32), y


def _rows(X, n: int = 24) -> np.ndarray:
    return X[np.linspace(0, len(X) - 1, n).astype(int)]


@pytest.mark.parametrize("kernel", ["linear", "rbf", "poly", "sigmoid"])
@pytest.mark.parametrize("data", ["iris", "breast_cancer"])
def test_svc(data, kernel, tmp_path):
    X, y = _data(data, 6)
    if data == "breast_cancer" or kernel == "sigmoid":  # standardized, as SVMs are used: unscaled breast_cancer
        X = (X - X.mean(0)) / X.std(0)                   # features (areas ~1e3) make the decisions ill-conditioned
    model = svm.SVC(kernel=kernel, degree=3, gamma="scale", max_iter=20000).fit(X, y)
    # a cubic kernel triples the f32 rounding of its dot products: onnxruntime's and webinfer's decisions both
    # differ from scikit-learn's double ones by 1.4e-4 on iris (measured), and from each other by 1e-4
    check(to_onnx(model, X[:1], target_opset=OPSETS), {"X": _rows(X)}, tmp_path,
          rtol=3e-4 if kernel == "poly" else 1e-5)


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_svr(kernel, tmp_path):
    X, y = _data("diabetes")
    model = svm.SVR(kernel=kernel, C=50.0).fit(X, y)
    check(to_onnx(model, X[:1], target_opset=OPSETS), {"X": _rows(X)}, tmp_path)


def test_one_class_svm(tmp_path):
    X, _ = _data("iris")
    model = svm.OneClassSVM(gamma="scale", nu=0.2).fit(X)
    check(to_onnx(model, X[:1], target_opset=OPSETS), {"X": _rows(X)}, tmp_path)


@pytest.mark.parametrize("post", ["LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
def test_svm_classifier_post_transform(post, tmp_path):
    """The SVMClassifier node alone, with a post_transform over its pair scores (converters leave it NONE)."""
    from onnx import TensorProto, helper

    X, y = _data("iris")
    node = to_onnx(svm.SVC(kernel="rbf").fit(X, y), X[:1], target_opset=OPSETS).graph.node[0]
    for a in node.attribute:
        if a.name == "post_transform":
            a.s = post.encode()
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 4])],
                          [helper.make_tensor_value_info(node.output[0], TensorProto.INT64, [None]),
                           helper.make_tensor_value_info(node.output[1], TensorProto.FLOAT, [None, 3])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("ai.onnx.ml", 3)])
    check(model, {"X": _rows(X)}, tmp_path)


@pytest.mark.parametrize("data", ["iris", "wine", "breast_cancer"])
def test_svc_probabilities(data, tmp_path):
    """SVC(probability=True): Platt's pair probabilities coupled by onnxruntime's iteration, on the GPU."""
    X, y = _data(data, 6)
    X = (X - X.mean(0)) / X.std(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # (scikit-learn 1.9 deprecates probability=True)
        model = svm.SVC(kernel="rbf", probability=True, random_state=0).fit(X, y)
        onx = to_onnx(model, X[:1], target_opset=OPSETS)
    check(onx, {"X": _rows(X)}, tmp_path)
