"""Output shapes and types of the ai.onnx.ml ops (graph/shapes.py's walk; ONNX's own inference knows few of them),
as onnxruntime's kernels size them: a [N, F] input (or [F], one row) gives [N] labels and [N, columns] scores.
The lowerings (codegen/kernels/ml_*.py) compute the same shapes again from the tensors they get."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from .. import dims as D

F32, I64 = ir.DataType.FLOAT, ir.DataType.INT64


def _attr(node: ir.Node, name: str, default=None):
    a = node.attributes.get(name)
    if a is None:
        return default
    v = a.value
    return v.numpy() if isinstance(v, ir.TensorProtocol) else v


def _count(node: ir.Node, *names: str) -> int:
    """The length of the first of ``names`` the node has (a list or a tensor attribute)."""
    for name in names:
        v = _attr(node, name)
        if v is not None and len(np.asarray(v).reshape(-1)):
            return len(np.asarray(v).reshape(-1))
    return 0


def _classifier_columns(node: ir.Node, features) -> int | None:
    op = node.op_type
    labels = _count(node, "classlabels_strings", "classlabels_ints", "classlabels_int64s")
    if op == "LinearClassifier":
        classes = _count(node, "intercepts")
        return 2 if classes == 1 and labels == 2 else classes or None
    if op == "TreeEnsembleClassifier":
        return labels or None
    if op == "SVMClassifier":
        if _count(node, "prob_a") or not _count(node, "support_vectors"):
            return labels or None
        return 2 if labels == 2 else labels * (labels - 1) // 2
    return None


def infer_ml(si, node: ir.Node) -> list[tuple[tuple | None, ir.DataType | None]] | None:
    """[(shape, dtype)] per output of an ai.onnx.ml node, or None when unknown."""
    x = si.shape(node.inputs[0]) if node.inputs and node.inputs[0] is not None else None
    if x is None:
        return None
    op, xt = node.op_type, si.dtype(node.inputs[0])
    rows = x[0] if len(x) == 2 else 1
    if op in ("LinearClassifier", "TreeEnsembleClassifier", "SVMClassifier"):
        cols = _classifier_columns(node, x[-1])
        return [((rows,), I64), (None if cols is None else (rows, cols), F32)]
    if op == "LinearRegressor":
        targets = _count(node, "intercepts") or int(_attr(node, "targets", 1))
        return [((rows, targets), F32)]
    if op in ("TreeEnsembleRegressor", "TreeEnsemble"):
        dtype = xt if op == "TreeEnsemble" and xt in (ir.DataType.DOUBLE, ir.DataType.FLOAT16) else F32
        return [((rows, int(_attr(node, "n_targets", 1))), dtype)]
    if op == "SVMRegressor":
        return [((rows, 1), F32)]
    if op in ("Scaler", "Normalizer"):
        return [(tuple(x), F32)]
    if op in ("Binarizer", "Imputer"):
        return [(tuple(x), xt)]
    if op == "LabelEncoder":
        vt = _attr(node, "values_tensor")
        dtype = (ir.DataType.from_numpy(vt.dtype) if vt is not None else
                 F32 if _attr(node, "values_floats") is not None else I64)
        return [(tuple(x), dtype)]
    if op == "OneHotEncoder":
        return [((*x, _count(node, "cats_int64s", "cats_strings")), F32)]
    if op == "ArrayFeatureExtractor":
        idx = si.shape(node.inputs[1])
        k = None if idx is None or any(d is None for d in idx) else D.product(idx)
        return [(None if k is None else ((*x[:-1], k) if len(x) > 1 else (1, k)), xt)]
    if op == "FeatureVectorizer":
        return [((rows, int(sum(_attr(node, "inputdimensions", [])))), F32)]
    return None
