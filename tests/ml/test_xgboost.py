"""XGBoost models converted by onnxmltools (TreeEnsembleClassifier/Regressor with BRANCH_LT nodes and base
values), built by webinfer and compared with onnxruntime CPU."""

from __future__ import annotations

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")
onnxmltools = pytest.importorskip("onnxmltools")

from ml_ref import check  # noqa: E402
from onnxmltools.convert.common.data_types import FloatTensorType  # noqa: E402
from sklearn import datasets  # noqa: E402


@pytest.mark.parametrize("estimator,data", [("XGBClassifier", "iris"), ("XGBClassifier", "breast_cancer"),
                                            ("XGBRegressor", "diabetes")])
def test_xgboost(estimator, data, tmp_path):
    X, y = getattr(datasets, f"load_{data}")(return_X_y=True)
    X = X.astype(np.float32)
    model = getattr(xgb, estimator)(n_estimators=8, max_depth=3).fit(X, y)
    onx = onnxmltools.convert_xgboost(model, initial_types=[("X", FloatTensorType([None, X.shape[1]]))],
                                      target_opset=15)
    check(onx, {"X": X[np.linspace(0, len(X) - 1, 24).astype(int)]}, tmp_path)
