"""graph/shapes.py's inference of the ai.onnx.ml outputs (graph/ml_shapes.py) equals the shapes onnxruntime's
kernels give, for real converted models and the ops alone (a fixed batch: every dim checked)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from webinfer.graph.importer import import_model
from webinfer.graph.shapes import infer

pytest.importorskip("skl2onnx")
ML = "ai.onnx.ml"


def _fixed_batch(model: onnx.ModelProto, rows: int) -> onnx.ModelProto:
    for v in model.graph.input:
        v.type.tensor_type.shape.dim[0].dim_value = rows
    return model


def _sklearn_models():
    from skl2onnx import to_onnx
    from sklearn import datasets, ensemble, linear_model, svm

    X, y = datasets.load_iris(return_X_y=True)
    X = X.astype(np.float32)
    yb = (y > 0).astype(int)
    ops = {"": 18, ML: 3}
    fitted = [linear_model.LogisticRegression().fit(X, y), linear_model.LogisticRegression().fit(X, yb),
              ensemble.RandomForestClassifier(n_estimators=2, random_state=0).fit(X, y),
              ensemble.GradientBoostingClassifier(n_estimators=2).fit(X, yb), svm.SVC().fit(X, y), svm.SVC().fit(X, yb),
              linear_model.LinearRegression().fit(X, y), svm.SVR().fit(X, y)]
    return X, [to_onnx(m, X[:1], target_opset=ops, options={id(m): {"zipmap": False}}
                       if hasattr(m, "predict_proba") or isinstance(m, svm.SVC) else None) for m in fitted]


def test_ml_output_shapes_match_onnxruntime():
    X, models = _sklearn_models()
    node = helper.make_node("OneHotEncoder", ["X"], ["Y"], domain=ML, cats_int64s=[1, 2, 3])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [7, 4])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    models.append(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(ML, 3)]))
    checked = 0
    for model in models:
        model = _fixed_batch(model, 7)
        si = infer(import_model(model))
        values = {v.name: v for n in si.model.graph for v in n.outputs}
        names = [o for n in model.graph.node if n.domain == ML for o in n.output if o]
        known = {v.name for v in model.graph.output}
        model.graph.output.extend(helper.make_empty_tensor_value_info(o) for o in names if o not in known)
        ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        runs = dict(zip(names, ref.run(names, {"X": X[:7]})))
        for name in names:
            assert si.shape(values[name]) == runs[name].shape, name
            checked += 1
    assert checked >= 10
