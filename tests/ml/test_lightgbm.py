"""LightGBM models converted by onnxmltools (as people convert them: opset 8-9 files, upgraded at import), built by
webinfer and compared with onnxruntime CPU: labels exactly, scores within 1e-5 relative."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

lgb = pytest.importorskip("lightgbm")
onnxmltools = pytest.importorskip("onnxmltools")

from ml_ref import check  # noqa: E402
from onnxmltools.convert.common.data_types import FloatTensorType  # noqa: E402
from sklearn import datasets  # noqa: E402

warnings.filterwarnings("ignore", category=UserWarning)


def _convert(model, features: int, **kw):
    return onnxmltools.convert_lightgbm(model, initial_types=[("X", FloatTensorType([None, features]))],
                                        target_opset=15, **kw)


def _data(name: str):
    X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    return X.astype(np.float32), y


@pytest.mark.parametrize("data", ["iris", "breast_cancer"])
@pytest.mark.parametrize("zipmap", [True, False])
def test_lgbm_classifier(data, zipmap, tmp_path):
    X, y = _data(data)
    model = lgb.LGBMClassifier(n_estimators=12, num_leaves=7, verbose=-1).fit(X, y)
    rows = X[np.linspace(0, len(X) - 1, 24).astype(int)]
    check(_convert(model, X.shape[1], zipmap=zipmap), {"X": rows}, tmp_path)


@pytest.mark.parametrize("objective", ["regression", "poisson"])
def test_lgbm_regressor(objective, tmp_path):
    X, y = _data("diabetes")
    model = lgb.LGBMRegressor(n_estimators=12, num_leaves=7, objective=objective, verbose=-1).fit(X, y)
    check(_convert(model, X.shape[1]), {"X": X[::20]}, tmp_path)
