"""Real fitted scikit-learn models (the datasets sklearn bundles: no download), converted by skl2onnx as people
convert them, built by webinfer and compared with onnxruntime CPU: labels exactly, probabilities and values
within 1e-5 relative. ZipMap outputs come back as onnxruntime gives them (a {label: probability} dict per row),
string labels as strings; the data ops run as GPU kernels."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")
pytest.importorskip("skl2onnx")

from ml_ref import check  # noqa: E402
from skl2onnx import to_onnx  # noqa: E402
from sklearn import datasets, ensemble, linear_model, pipeline, preprocessing, tree  # noqa: E402

warnings.filterwarnings("ignore", category=FutureWarning)
OPSETS = {"": 18, "ai.onnx.ml": 3}


def _data(name: str):
    X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    return X.astype(np.float32), y


def _convert(model, X, zipmap: bool | None = None):
    options = None if zipmap is None else {id(model): {"zipmap": zipmap}}
    return to_onnx(model, X[:1], target_opset=OPSETS, options=options)


def _rows(X, n: int = 24) -> np.ndarray:
    """A spread of rows (every class of a sorted dataset), plus the first."""
    return X[np.linspace(0, len(X) - 1, n).astype(int)]


@functools.lru_cache
def _logistic(data: str):
    X, y = _data(data)
    return X, linear_model.LogisticRegression(max_iter=5000).fit(X, y)


@pytest.mark.parametrize("zipmap", [True, False])
@pytest.mark.parametrize("data", ["iris", "breast_cancer"])
def test_logistic_regression(data, zipmap, tmp_path):
    X, model = _logistic(data)
    check(_convert(model, X, zipmap), {"X": _rows(X)}, tmp_path)


def test_logistic_regression_string_labels(tmp_path):
    """classlabels_strings: the GPU picks the class index, the run side gives the label and the ZipMap keys."""
    X, y = _data("iris")
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    model = linear_model.LogisticRegression(max_iter=500).fit(X, names)
    session = check(_convert(model, X), {"X": _rows(X)}, tmp_path)
    assert [f.kind for f in session.artifact.spec.output_formats] == ["labels", "zipmap"]


def test_digits_multiclass(tmp_path):
    X, y = _data("digits")
    X, y = X[:500], y[:500]  # (a quicker fit; 10 classes, 64 features all the same)
    model = pipeline.make_pipeline(preprocessing.StandardScaler(), linear_model.LogisticRegression(max_iter=300))
    check(_convert(model.fit(X, y), X, zipmap=False), {"X": _rows(X, 30)}, tmp_path)


@pytest.mark.parametrize("model", [linear_model.LinearRegression(), linear_model.Ridge(alpha=0.5)])
def test_linear_regression(model, tmp_path):
    X, y = _data("diabetes")
    check(_convert(model.fit(X, y), X), {"X": _rows(X)}, tmp_path)


def test_ridge_two_targets(tmp_path):
    X, y = _data("diabetes")
    model = linear_model.Ridge().fit(X, np.stack([y, -2 * y + 5], axis=1))
    check(_convert(model, X), {"X": _rows(X)}, tmp_path)


def test_scaler_pipeline(tmp_path):
    X, y = _data("iris")
    model = pipeline.make_pipeline(preprocessing.StandardScaler(), linear_model.LogisticRegression()).fit(X, y)
    check(_convert(model, X), {"X": _rows(X)}, tmp_path)


@pytest.mark.parametrize("data,model", [
    ("iris", tree.DecisionTreeClassifier(max_depth=5, random_state=0)),
    ("breast_cancer", tree.DecisionTreeClassifier(max_depth=4, random_state=0)),
    ("iris", ensemble.RandomForestClassifier(n_estimators=8, max_depth=5, random_state=0)),
    ("breast_cancer", ensemble.RandomForestClassifier(n_estimators=8, max_depth=5, random_state=0)),
    ("iris", ensemble.GradientBoostingClassifier(n_estimators=10, max_depth=3, random_state=0)),
    ("breast_cancer", ensemble.GradientBoostingClassifier(n_estimators=10, max_depth=3, random_state=0)),
])
def test_tree_classifiers(data, model, tmp_path):
    X, y = _data(data)
    check(_convert(model.fit(X, y), X), {"X": _rows(X)}, tmp_path)


@pytest.mark.parametrize("model", [
    tree.DecisionTreeRegressor(max_depth=6, random_state=0),
    ensemble.RandomForestRegressor(n_estimators=8, max_depth=5, random_state=0),
    ensemble.GradientBoostingRegressor(n_estimators=10, max_depth=3, random_state=0),
])
def test_tree_regressors(model, tmp_path):
    X, y = _data("diabetes")
    check(_convert(model.fit(X, y), X), {"X": _rows(X)}, tmp_path)


def test_one_hot_encoder_pipeline(tmp_path):
    """Integer categories: skl2onnx's per-column Gather -> OneHotEncoder -> Concat, then a linear classifier."""
    rng = np.random.default_rng(0)
    X = rng.integers(0, 4, (120, 3)).astype(np.int64)
    y = (X[:, 0] + 2 * X[:, 2] > 4).astype(int)
    model = pipeline.make_pipeline(preprocessing.OneHotEncoder(), linear_model.LogisticRegression()).fit(X, y)
    check(_convert(model, X), {"X": X[:25]}, tmp_path)


@pytest.mark.parametrize("transform", [preprocessing.Normalizer(norm="l1"), preprocessing.Normalizer(norm="l2"),
                                       preprocessing.Normalizer(norm="max"), preprocessing.Binarizer(threshold=0.5),
                                       preprocessing.MinMaxScaler()])
def test_feature_transforms(transform, tmp_path):
    X, _ = _data("diabetes")
    check(_convert(transform.fit(X), X), {"X": _rows(X)}, tmp_path)


def test_imputer(tmp_path):
    from sklearn.impute import SimpleImputer

    X, _ = _data("diabetes")
    X = X.copy()
    X[::7, 2] = np.nan
    X[3::11, 5] = np.nan
    check(_convert(SimpleImputer(strategy="mean").fit(X), X), {"X": X[:30]}, tmp_path)


def _more_estimators():
    from sklearn import calibration, multiclass, naive_bayes, neighbors, neural_network, svm

    return {"knn": neighbors.KNeighborsClassifier(3), "mlp": neural_network.MLPClassifier((8,), max_iter=300,
                                                                                          random_state=0),
            "linear-svc": svm.LinearSVC(max_iter=5000), "nu-svc": svm.NuSVC(), "gaussian-nb": naive_bayes.GaussianNB(),
            "one-vs-rest": multiclass.OneVsRestClassifier(linear_model.LogisticRegression()),
            "calibrated": calibration.CalibratedClassifierCV(svm.LinearSVC(max_iter=5000), cv=2),
            "adaboost": ensemble.AdaBoostClassifier(n_estimators=5, random_state=0),
            "bagging": ensemble.BaggingClassifier(n_estimators=3, random_state=0)}


@pytest.mark.parametrize("name", list(_more_estimators()))
def test_more_classifiers(name, tmp_path):
    """Converters that mix ai.onnx.ml ops with standard ones (ArrayFeatureExtractor picking each row's class label
    by a data-dependent index, LinearClassifier per class, trees, SVMs)."""
    X, y = _data("iris")
    model = _more_estimators()[name].fit(X, y)
    check(_convert(model, X), {"X": _rows(X, 20)}, tmp_path)


def test_isolation_forest(tmp_path):
    X, _ = _data("iris")
    model = ensemble.IsolationForest(n_estimators=5, random_state=0).fit(X)
    check(_convert(model, X), {"X": _rows(X, 20)}, tmp_path)


def _pipelines():
    from sklearn import compose, impute

    return {"column-transformer": pipeline.make_pipeline(compose.ColumnTransformer(
                [("num", preprocessing.StandardScaler(), [0, 1]), ("bin", preprocessing.Binarizer(threshold=1.0), [2, 3])]),
                linear_model.LogisticRegression()),
            "impute-scale-forest": pipeline.make_pipeline(impute.SimpleImputer(), preprocessing.MinMaxScaler(),
                                                          ensemble.RandomForestClassifier(n_estimators=3, random_state=0)),
            "stacking": ensemble.StackingClassifier([("a", linear_model.LogisticRegression()),
                                                     ("b", tree.DecisionTreeClassifier(max_depth=3, random_state=0))])}


@pytest.mark.parametrize("name", list(_pipelines()))
def test_pipelines(name, tmp_path):
    X, y = _data("iris")
    check(_convert(_pipelines()[name].fit(X, y), X), {"X": _rows(X, 20)}, tmp_path)


def test_zipmap_columns_and_multi_output_forest(tmp_path):
    """skl2onnx's zipmap='columns' (one output per class) and a two-target forest regressor."""
    X, y = _data("iris")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    model = linear_model.LogisticRegression(max_iter=500).fit(X, y)
    onx = to_onnx(model, X[:1], target_opset=OPSETS, options={id(model): {"zipmap": "columns"}})
    check(onx, {"X": _rows(X, 20)}, tmp_path / "a")
    forest = ensemble.RandomForestRegressor(n_estimators=3, max_depth=4, random_state=0).fit(X, X[:, :2] * [1, -2])
    check(_convert(forest, X), {"X": _rows(X, 20)}, tmp_path / "b")
