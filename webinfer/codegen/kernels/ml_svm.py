"""ai.onnx.ml support vector machines as onnxruntime runs them: SVMClassifier (one-vs-one decisions and votes;
with prob_a/prob_b, SVC(probability=True), the coupled class probabilities) and SVMRegressor (SVR, NuSVR, OneClassSVM), with LINEAR, POLY, RBF
and SIGMOID kernels. The kernel values run as one GPU kernel per (row, support vector), the decisions as a
second one per row (shaders/ml_svm.wgsl.j2); the support vectors and coefficients are weights.
"""

from __future__ import annotations

import numpy as np

from ..registry import lowering
from ._ml_head import class_labels, post_transform, run_head, text
from .ml_linear import ML, rows_features

KERNELS = ("LINEAR", "POLY", "RBF", "SIGMOID")


def _f32(v: float) -> str:
    return f"bitcast<f32>({int(np.float32(v).view(np.uint32))}u)"


def kernel_values(ctx, x, rows, features):
    """kv [rows, V] = K(x, support vectors); None in liblinear mode (no support vectors)."""
    sv = np.asarray(ctx.attr("support_vectors") or [], np.float32)
    kernel = text(ctx.attr("kernel_type"), "LINEAR")
    if kernel not in KERNELS:
        raise ctx.unsupported(f"kernel_type {kernel!r}")
    if sv.size == 0:
        return None, 0
    if sv.size % features:
        raise ctx.unsupported(f"{sv.size} support vector values for {features} features")
    V = sv.size // features
    gamma, coef0, degree = (list(ctx.attr("kernel_params") or []) + [0.0, 0.0, 0.0])[:3]
    kv = ctx.temp("float32", (rows, V))
    int_degree = int(degree) if float(degree).is_integer() and 0 <= degree <= 16 else None
    ctx.dispatch("ml_svm.wgsl.j2", {"x": ctx.gpu(x), "sv": ctx.gpu(ctx._l.constant(sv))}, {"kv": kv},
                 work=kv.numel, params={"n": kv.numel, "V": V, "F": features}, op="kernel", kernel=kernel,
                 gamma=_f32(gamma), coef0=_f32(coef0), degree=_f32(degree), int_degree=int_degree)
    return kv, V


@lowering("SVMClassifier", domain=ML)
def lower_svm_classifier(ctx) -> None:
    x = ctx.inputs[0]
    rows, features = rows_features(ctx, x)
    labels = class_labels(ctx, "classlabels_strings", "classlabels_ints")
    kv, V = kernel_values(ctx, x, rows, features)
    if kv is None:
        raise ctx.unsupported("liblinear mode (no support vectors) is not supported yet")
    C = len(labels)
    per_class = [int(v) for v in ctx.attr("vectors_per_class") or []]
    if C < 2 or len(per_class) != C or sum(per_class) != V:
        raise ctx.unsupported(f"vectors_per_class {per_class} for {C} classes and {V} support vectors")
    coef = np.asarray(ctx.attr("coefficients"), np.float32)
    pairs = C * (C - 1) // 2
    rho = np.asarray(ctx.attr("rho"), np.float32)
    if coef.size != (C - 1) * V or rho.size < pairs:
        raise ctx.unsupported(f"{coef.size} coefficients and {rho.size} rho for {C} classes and {V} vectors")
    starts = np.concatenate([[0], np.cumsum(per_class)[:-1]])
    vs = np.stack([starts, per_class], axis=1).astype(np.int32).reshape(-1)
    post = post_transform(ctx)
    prob_a, prob_b = ctx.attr("prob_a") or [], ctx.attr("prob_b") or []
    if len(prob_a) != len(prob_b) or (prob_a and len(prob_a) < pairs):
        raise ctx.unsupported(f"{len(prob_a)} prob_a and {len(prob_b)} prob_b for {pairs} class pairs")
    proba = bool(prob_a)
    cols = C if proba else 2 if C == 2 else pairs
    direct = post == "NONE" or (C == 2 and not proba)  # (else the transform runs after, over the row)
    label = ctx.output(0, "int64", (rows,))
    scores = ctx.output(1, "float32", (rows, cols)) if direct else ctx.temp("float32", (rows, cols))
    reads = {"kv": ctx.gpu(kv), "coef": ctx.gpu(ctx._l.constant(coef)), "rho": ctx.gpu(ctx._l.constant(rho)),
             "vs": ctx.gpu(ctx._l.constant(vs)), "lbl": ctx.gpu(ctx._l.constant(labels))}
    if proba:
        pab = np.stack([np.asarray(prob_a, np.float32), np.asarray(prob_b, np.float32)], axis=1).reshape(-1)
        reads["pab"] = ctx.gpu(ctx._l.constant(pab))
    ctx.dispatch("ml_svm.wgsl.j2", reads, {"out": scores, "label": label}, work=rows,
                 params={"n": rows, "V": V, "K": cols}, op="classify", classes=C, post=post, proba=proba, wg=64)
    if not direct:  # the transform over the row's scores, as onnxruntime's batched update
        run_head(ctx, scores, rows, kind="multi", post=post, z_cols=cols, z_output=1)


@lowering("SVMRegressor", domain=ML)
def lower_svm_regressor(ctx) -> None:
    x = ctx.inputs[0]
    rows, features = rows_features(ctx, x)
    kv, V = kernel_values(ctx, x, rows, features)
    if kv is None:
        raise ctx.unsupported("liblinear mode (no support vectors) is not supported yet")
    coef = np.asarray(ctx.attr("coefficients"), np.float32)
    rho = np.asarray(ctx.attr("rho") or [0.0], np.float32)
    if coef.size != V:
        raise ctx.unsupported(f"{coef.size} coefficients for {V} support vectors")
    post = post_transform(ctx)
    if post not in ("NONE", "PROBIT"):
        raise ctx.unsupported(f"post_transform {post} on a regressor (onnxruntime applies PROBIT only)")
    out = ctx.output(0, "float32", (rows, 1))
    reads = {"kv": ctx.gpu(kv), "coef": ctx.gpu(ctx._l.constant(coef)), "rho": ctx.gpu(ctx._l.constant(rho))}
    ctx.dispatch("ml_svm.wgsl.j2", reads, {"out": out}, work=rows, params={"n": rows, "V": V}, op="regress",
                 post=post, one_class=bool(ctx.attr("one_class", 0)), wg=64)
