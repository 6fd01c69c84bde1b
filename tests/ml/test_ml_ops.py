"""ai.onnx.ml ops one at a time, with the attributes converters rarely emit (every post_transform, aggregate and
branch mode, missing values, base values, one-score classifiers, numeric LabelEncoder), against onnxruntime CPU."""

from __future__ import annotations

import numpy as np
import pytest
from ml_ref import check
from onnx import TensorProto, helper

ML = "ai.onnx.ml"
rng = np.random.default_rng(0)


def _model(node, x: np.ndarray, outputs: list[tuple[str, int, list]], ml_opset: int = 3, extra_inputs=()):
    inputs = [helper.make_tensor_value_info("X", helper.np_dtype_to_tensor_dtype(x.dtype), list(x.shape)),
              *extra_inputs]
    outs = [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs]
    g = helper.make_graph([node], "g", inputs, outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(ML, ml_opset)])


def _classifier(node, x, classes: int):
    return _model(node, x, [("Y", TensorProto.INT64, [x.shape[0]]), ("Z", TensorProto.FLOAT, [x.shape[0], classes])])


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"])
@pytest.mark.parametrize("targets", [1, 3])
def test_linear_regressor(post, targets, tmp_path):
    x = rng.standard_normal((9, 4)).astype(np.float32)
    coef = (rng.standard_normal(4 * targets) * 0.1).astype(np.float32)
    inter = (rng.random(targets) * 0.4 + 0.3).astype(np.float32)  # PROBIT wants values inside (0, 1)
    x[0] = 0.0  # a zero row: SOFTMAX_ZERO keeps an exact 0 at 0
    node = helper.make_node("LinearRegressor", ["X"], ["Y"], domain=ML, coefficients=coef, intercepts=inter,
                            targets=targets, post_transform=post)
    check(_model(node, x, [("Y", TensorProto.FLOAT, [9, targets])]), {"X": x}, tmp_path)


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
def test_linear_classifier_one_score(post, tmp_path):
    """One coefficient row and two labels: label by score > 0, onnxruntime adds the second class [1 - p, p].
    (PROBIT is left out: onnxruntime leaves the second column unwritten.)"""
    x = rng.standard_normal((10, 3)).astype(np.float32)
    node = helper.make_node("LinearClassifier", ["X"], ["Y", "Z"], domain=ML, coefficients=[0.3, -0.2, 0.25],
                            intercepts=[0.1], classlabels_ints=[3, 7], post_transform=post)
    check(_classifier(node, x, 2), {"X": x}, tmp_path)


@pytest.mark.parametrize("post", ["NONE", "SOFTMAX", "SOFTMAX_ZERO", "LOGISTIC"])
def test_linear_classifier_int_input(post, tmp_path):
    x = rng.integers(-3, 4, (8, 3)).astype(np.int64)
    node = helper.make_node("LinearClassifier", ["X"], ["Y", "Z"], domain=ML, coefficients=list(rng.standard_normal(12)),
                            intercepts=[0.0, 0.1, -0.1, 0.2], classlabels_ints=[10, 20, 30, 40], post_transform=post)
    check(_classifier(node, x, 4), {"X": x}, tmp_path)


def _random_forest(n_trees: int, depth: int, features: int, modes: list[str], prefix: str, targets: int,
                   positive: bool = False, only_target: int | None = None) -> dict:
    """Full binary trees of ``depth`` with random features, thresholds and modes; leaves weigh every target."""
    attrs = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
                             "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true",
                             f"{prefix}_treeids", f"{prefix}_nodeids", f"{prefix}_ids", f"{prefix}_weights")}
    for t in range(n_trees):
        internal = 2 ** depth - 1
        for i in range(2 ** (depth + 1) - 1):
            leaf = i >= internal
            attrs["nodes_treeids"].append(t)
            attrs["nodes_nodeids"].append(i)
            attrs["nodes_featureids"].append(int(rng.integers(features)))
            attrs["nodes_modes"].append("LEAF" if leaf else str(rng.choice(modes)))
            attrs["nodes_values"].append(float(np.round(rng.standard_normal(), 1)))
            attrs["nodes_truenodeids"].append(0 if leaf else 2 * i + 1)
            attrs["nodes_falsenodeids"].append(0 if leaf else 2 * i + 2)
            attrs["nodes_missing_value_tracks_true"].append(int(rng.integers(2)))
            if leaf:
                for c in ([only_target] if only_target is not None else range(targets)):
                    attrs[f"{prefix}_treeids"].append(t)
                    attrs[f"{prefix}_nodeids"].append(i)
                    attrs[f"{prefix}_ids"].append(c)
                    w = rng.random() if positive else rng.standard_normal()
                    attrs[f"{prefix}_weights"].append(float(w) * 0.3)
    return attrs


ALL_MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]


def _tree_input():
    x = np.round(rng.standard_normal((16, 5)), 1).astype(np.float32)  # values equal to thresholds too
    x[2, 1] = x[5, 3] = x[7, 0] = np.nan
    return x


@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize("post", ["NONE", "SOFTMAX", "LOGISTIC"])
def test_tree_regressor(aggregate, post, tmp_path):
    x = _tree_input()
    attrs = _random_forest(4, 3, 5, ALL_MODES, "target", 2)
    node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], domain=ML, n_targets=2, aggregate_function=aggregate,
                            post_transform=post, base_values=[0.5, -0.25], **attrs)
    check(_model(node, x, [("Y", TensorProto.FLOAT, [16, 2])]), {"X": x}, tmp_path)


@pytest.mark.parametrize("classes,base,positive,only", [
    (3, None, False, None), (4, [0.1, 0.2, -0.3, 0.0], False, None), (2, None, True, None), (2, None, False, None),
    (2, [0.2], False, 0), (2, [0.2], True, 1), (2, [0.5, 0.5], False, 1), (2, [0.1, -0.1], False, None)])
@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX"])
def test_tree_classifier(classes, base, positive, only, post, tmp_path):
    """onnxruntime's two-class rules: one class scored (binary case), all-positive weights, 0/1/2 base values."""
    x = _tree_input()
    attrs = _random_forest(3, 3, 5, ALL_MODES, "class", classes, positive, only)
    extra = {"base_values": base} if base is not None else {}
    node = helper.make_node("TreeEnsembleClassifier", ["X"], ["Y", "Z"], domain=ML, post_transform=post,
                            classlabels_int64s=list(range(100, 100 + classes)), **extra, **attrs)
    check(_classifier(node, x, classes), {"X": x}, tmp_path)


@pytest.mark.parametrize("keys,values,x", [
    ("int64s", "int64s", np.array([[1, 5, 9], [7, 2, 1]], np.int64)),
    ("int64s", "floats", np.array([1, 5, 9, 7, 2], np.int64)),
    ("floats", "int64s", np.array([0.5, 1.5, 3.0, np.nan, 2.5], np.float32)),
    ("floats", "floats", np.array([0.5, 1.5, 3.0, 2.5], np.float32)),
])
def test_label_encoder(keys, values, x, tmp_path):
    key_vals = [1, 7, 9] if keys == "int64s" else [0.5, 2.5, 3.0]
    val_vals = [10, 20, 30] if values == "int64s" else [0.25, -1.5, 8.0]
    default = {"default_int64": -7} if values == "int64s" else {"default_float": 42.0}
    node = helper.make_node("LabelEncoder", ["X"], ["Y"], domain=ML, **{f"keys_{keys}": key_vals,
                            f"values_{values}": val_vals}, **default)
    out_type = TensorProto.INT64 if values == "int64s" else TensorProto.FLOAT
    check(_model(node, x, [("Y", out_type, list(x.shape))], ml_opset=2), {"X": x}, tmp_path)


def test_array_feature_extractor_and_one_hot(tmp_path):
    x = rng.integers(0, 5, (6, 4)).astype(np.float32)
    idx = helper.make_tensor_value_info("I", TensorProto.INT64, [3])
    g = helper.make_graph(
        [helper.make_node("ArrayFeatureExtractor", ["X", "I"], ["F"], domain=ML),
         helper.make_node("OneHotEncoder", ["F"], ["Y"], domain=ML, cats_int64s=[0, 2, 4, 1])],
        "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [6, 4]), idx],
        [helper.make_tensor_value_info("F", TensorProto.FLOAT, [6, 3]),
         helper.make_tensor_value_info("Y", TensorProto.FLOAT, [6, 3, 4])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(ML, 3)])
    check(model, {"X": x, "I": np.array([3, 0, 3], np.int64)}, tmp_path)


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_imputer_and_scaler(dtype, tmp_path):
    x = rng.integers(-2, 3, (7, 3)).astype(dtype)
    if dtype == np.float32:
        x[1, 2] = x[4, 0] = np.nan
        imp = helper.make_node("Imputer", ["X"], ["M"], domain=ML, imputed_value_floats=[9.0, 8.0, 7.0],
                               replaced_value_float=float("nan"))
    else:
        imp = helper.make_node("Imputer", ["X"], ["M"], domain=ML, imputed_value_int64s=[5], replaced_value_int64=0)
    three = dtype == np.float32  # (onnxruntime wants as many offsets as scales: 3, or 1 for every feature)
    scale = helper.make_node("Scaler", ["M"], ["Y"], domain=ML, offset=[0.5, -1.0, 2.0] if three else [0.5],
                             scale=[2.0, -1.0, 0.25] if three else [3.0])
    g = helper.make_graph([imp, scale], "g", [helper.make_tensor_value_info("X", helper.np_dtype_to_tensor_dtype(
        x.dtype), [7, 3])], [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [7, 3])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(ML, 3)])
    check(model, {"X": x}, tmp_path)


@pytest.mark.parametrize("base", [None, [0.2], [0.5, 0.5], [0.1, -0.1]])
@pytest.mark.parametrize("weights", [[0.3, 0.8], [-0.4, 0.7]])
@pytest.mark.parametrize("scored", [0, 1])
def test_tree_classifier_two_class_rules(scored, weights, base, tmp_path):
    """A stump whose leaves score one class only: the label threshold (0.5 with all-positive weights, else 0), the
    second column onnxruntime adds, and what its base values do there."""
    x = np.array([[-1.0], [1.0], [0.0]], np.float32)
    extra = {"base_values": base} if base is not None else {}
    node = helper.make_node(
        "TreeEnsembleClassifier", ["X"], ["Y", "Z"], domain=ML, nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2],
        nodes_featureids=[0, 0, 0], nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"], nodes_values=[0.0, 0.0, 0.0],
        nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0], class_treeids=[0, 0], class_nodeids=[1, 2],
        class_ids=[scored, scored], class_weights=weights, classlabels_int64s=[100, 101], **extra)
    check(_classifier(node, x, 2), {"X": x}, tmp_path)


def test_feature_vectorizer(tmp_path):
    """Three inputs side by side: one cut to 2 of its 3 columns, one padded from 1 to 3, one as it is."""
    a = rng.standard_normal((5, 3)).astype(np.float32)
    b = rng.standard_normal((5, 1)).astype(np.float32)
    c = rng.standard_normal((5, 1)).astype(np.float32)
    node = helper.make_node("FeatureVectorizer", ["A", "B", "C"], ["Y"], domain=ML, inputdimensions=[2, 3, 1])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("A", TensorProto.FLOAT, ["N", 3]),
                                        helper.make_tensor_value_info("B", TensorProto.FLOAT, ["N", 1]),
                                        helper.make_tensor_value_info("C", TensorProto.FLOAT, ["N", 1])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 6])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(ML, 1)])
    check(model, {"A": a, "B": b, "C": c}, tmp_path)


def test_label_encoder_tensor_attributes(tmp_path):
    """ai.onnx.ml v4's keys_tensor / values_tensor / default_tensor (numeric)."""
    x = np.array([[3, 8, -1], [5, 3, 0]], np.int64)
    node = helper.make_node("LabelEncoder", ["X"], ["Y"], domain=ML,
                            keys_tensor=helper.make_tensor("k", TensorProto.INT64, [3], [3, 5, 8]),
                            values_tensor=helper.make_tensor("v", TensorProto.FLOAT, [3], [0.5, -2.0, 7.25]),
                            default_tensor=helper.make_tensor("d", TensorProto.FLOAT, [1], [-9.0]))
    check(_model(node, x, [("Y", TensorProto.FLOAT, [2, 3])], ml_opset=4), {"X": x}, tmp_path)


def test_tree_records_are_16_bytes(monkeypatch, tmp_path):
    """A large LightGBM ensemble (PyPI luscinia: 4.8 M nodes, 11 classes) must fit one 128 MiB binding, so a node
    record takes 16 bytes: here 40 trees of 63 nodes (40 KiB of records, 80 KiB at 32 bytes) under a 64 KiB
    binding limit, every mode and missing-value flag, still equal to onnxruntime."""
    from webinfer.options import LIMITS

    for tier in LIMITS.values():
        monkeypatch.setitem(tier, "max_binding_bytes", 64 * 1024)
    x = _tree_input()
    attrs = _random_forest(40, 5, 5, ALL_MODES, "class", 3)
    node = helper.make_node("TreeEnsembleClassifier", ["X"], ["Y", "Z"], domain=ML, classlabels_int64s=[0, 1, 2],
                            post_transform="SOFTMAX", **attrs)
    check(_classifier(node, x, 3), {"X": x}, tmp_path)


@pytest.mark.parametrize("broken", ["child", "weight"])
def test_tree_pointing_at_a_missing_node_is_refused(broken, tmp_path):
    from webinfer.build import build
    from webinfer.errors import WebinferError

    x = _tree_input()
    attrs = _random_forest(2, 2, 5, ALL_MODES, "target", 1)
    if broken == "child":
        attrs["nodes_truenodeids"][0] = 99
    else:
        attrs["target_nodeids"][-1] = 42
    node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], domain=ML, n_targets=1, **attrs)
    with pytest.raises(WebinferError, match="does not exist"):
        build(_model(node, x, [("Y", TensorProto.FLOAT, [16, 1])]), str(tmp_path / "a.wi"))


def test_a_forest_longer_than_llvmpipe_loop_budget(tmp_path):
    """llvmpipe ends an invocation's loops after some 30,000 iterations in all (its loop limiter): 2400 trees
    40 deep (a path with a leaf off each node, as boosted trees grow) walked by rows that go deep, or not, in one
    workgroup take about 96,000 steps (800 such trees in one dispatch already went wrong; PyPI luscinia's
    LightGBM has 7000); the walk is split into dispatches by tree range and must equal onnxruntime."""
    from ml_trees_fixture import caterpillar_forest

    x = np.linspace(-1, 1, 6 * 5, dtype=np.float32).reshape(6, 5)
    attrs = caterpillar_forest(2400, 40, 5, "target", rng)
    node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], domain=ML, n_targets=1, **attrs)
    check(_model(node, x, [("Y", TensorProto.FLOAT, [6, 1])]), {"X": x}, tmp_path, rtol=1e-4)
