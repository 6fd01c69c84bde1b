"""ai.onnx.ml's linear models and feature transforms, as scikit-learn converters (skl2onnx, onnxmltools) emit
them: LinearClassifier, LinearRegressor, Normalizer, Scaler, Binarizer, Imputer, ArrayFeatureExtractor,
OneHotEncoder (int64 categories) and LabelEncoder (numeric keys and values). Each is one WGSL kernel
(shaders/ml.wgsl.j2); the classifiers' post-transform and label run in the shared head (``_ml_head``), so they
match onnxruntime's CPU kernels, which are these ops' reference.
"""

from __future__ import annotations

import numpy as np

from ..registry import lowering
from ._ml_head import class_labels, int_labels, post_transform, run_head, text

ML = "ai.onnx.ml"


def rows_features(ctx, x):
    """(rows, features) of a classifier/regressor input: [N, F], or [F] as one row (onnxruntime's reading)."""
    if x.rank not in (1, 2) or not isinstance(x.shape[-1], int):
        raise ctx.unsupported("input [N, F] or [F] with a static F")
    return (x.shape[0] if x.rank == 2 else 1), x.shape[-1]


def linear_scores(ctx, x, coefficients, intercepts, rows, features, out=None):
    """raw[r, t] = x[r] . coefficients[t] + intercepts[t] (a temporary [rows, T] unless ``out``)."""
    coef = np.asarray(coefficients, np.float32)
    b = np.asarray(intercepts if intercepts is not None else [], np.float32)
    # onnxruntime: one target per intercept, reading the first targets * F coefficients (a model whose
    # coefficients were fitted on more features than its input declares still runs, on the first ones)
    targets = b.size or (coef.size // features if features else 0)
    if features == 0 or targets == 0 or coef.size < targets * features or (not b.size and coef.size % features):
        raise ctx.unsupported(f"{coef.size} coefficients and {b.size} intercepts for {features} features")
    coef = coef[: targets * features]
    raw = out if out is not None else ctx.temp("float32", (rows, targets))
    reads = {"x": ctx.gpu(x), "w": ctx.gpu(ctx._l.constant(coef))}
    if b.size:
        reads["b"] = ctx.gpu(ctx._l.constant(b))
    ctx.dispatch("ml.wgsl.j2", reads, {"out": raw}, work=raw.numel, params={"n": raw.numel, "T": targets,
                                                                          "F": features},
                 op="gemv", bias="b" in reads)
    return raw, targets


@lowering("LinearRegressor", domain=ML)
def lower_linear_regressor(ctx) -> None:
    x = ctx.inputs[0]
    rows, features = rows_features(ctx, x)
    post = post_transform(ctx)
    raw, targets = linear_scores(ctx, x, ctx.attr("coefficients"), ctx.attr("intercepts"), rows, features)
    if post == "NONE":
        ctx._set(0, raw)
        return
    run_head(ctx, raw, rows, kind="multi" if targets > 1 else "single", post=post, z_cols=targets)


@lowering("LinearClassifier", domain=ML)
def lower_linear_classifier(ctx) -> None:
    """onnxruntime's LinearClassifier: several classes -> argmax of the raw scores, then the transform; one score
    column and two labels -> label by score > 0 and scores [1 - p, p] (its ``add_second_class``; p = s, or the
    logistic of s)."""
    x = ctx.inputs[0]
    rows, features = rows_features(ctx, x)
    labels = class_labels(ctx, "classlabels_strings", "classlabels_ints")
    raw, targets = linear_scores(ctx, x, ctx.attr("coefficients"), ctx.attr("intercepts"), rows, features)
    post = post_transform(ctx)
    if targets > 1:
        if len(labels) < targets:
            raise ctx.unsupported(f"{len(labels)} class labels for {targets} classes")
        run_head(ctx, raw, rows, kind="multi", post=post, z_cols=targets, labels=labels)
    elif len(labels) == 2:
        run_head(ctx, raw, rows, kind="linear_binary", post=post, z_cols=2, labels=labels)
    else:  # (onnxruntime refuses such a model too)
        raise ctx.unsupported(f"one score column needs two class labels, got {len(labels)}")


def _elementwise(ctx, op: str, out_dtype: str, reads: dict, params: dict | None = None, **tctx):
    x = ctx.inputs[0]
    out = ctx.output(0, out_dtype, x.shape)
    if out.numel == 0:
        return out
    ctx.dispatch("ml.wgsl.j2", {"x": ctx.gpu(x), **reads}, {"out": out}, work=out.numel,
                 params={"n": out.numel, **(params or {})}, op=op, **tctx)
    return out


def _last_dim(ctx) -> int:
    x = ctx.inputs[0]
    if x.rank == 0 or not isinstance(x.shape[-1], int):
        raise ctx.unsupported("input with a static last dim")
    return x.shape[-1]


@lowering("Scaler", domain=ML)
def lower_scaler(ctx) -> None:
    off = np.asarray(ctx.attr("offset") or [0.0], np.float32)
    sc = np.asarray(ctx.attr("scale") or [1.0], np.float32)
    F = _last_dim(ctx)
    for name, v in (("offset", off), ("scale", sc)):
        if v.size not in (1, F):
            raise ctx.unsupported(f"{name} of {v.size} values for {F} features")
    _elementwise(ctx, "scale", "float32", {"off": ctx.gpu(ctx._l.constant(off)), "sc": ctx.gpu(ctx._l.constant(sc))},
                 {"F": F, "noff": off.size, "nsc": sc.size})


def _literal(value: float, dtype: str) -> str:
    if dtype in ("int64", "int32"):
        return f"{int(value)}i"
    return f"bitcast<f32>({int(np.float32(value).view(np.uint32))}u)"


@lowering("Binarizer", domain=ML)
def lower_binarizer(ctx) -> None:
    dt = ctx.inputs[0].dtype
    if dt not in ("float32", "float64", "int64", "int32"):
        raise ctx.unsupported(f"input type {dt}")
    threshold = float(ctx.attr("threshold", 0.0))
    if dt in ("int64", "int32") and threshold != int(threshold):
        threshold = float(np.floor(threshold))
    _elementwise(ctx, "binarize", dt, {}, threshold=_literal(threshold, dt), zero=_literal(0, dt), one=_literal(1, dt))


@lowering("Imputer", domain=ML)
def lower_imputer(ctx) -> None:
    dt = ctx.inputs[0].dtype
    floats = dt in ("float32", "float64")
    imputed = ctx.attr("imputed_value_floats" if floats else "imputed_value_int64s")
    if not imputed:
        raise ctx.unsupported(f"no imputed values for a {dt} input")
    imp = np.asarray(imputed, np.float32 if floats else np.int64)
    if not floats:
        imp = int_labels(ctx, imp)
    F = _last_dim(ctx)
    if imp.size not in (1, F):
        raise ctx.unsupported(f"{imp.size} imputed values for {F} features")
    replaced = ctx.attr("replaced_value_float", 0.0) if floats else ctx.attr("replaced_value_int64", 0)
    nan = floats and np.isnan(replaced)
    _elementwise(ctx, "impute", dt, {"imp": ctx.gpu(ctx._l.constant(imp))}, {"F": F, "nimp": imp.size},
                 nan_replaced=nan, replaced="0.0" if nan else _literal(replaced, dt))


@lowering("ArrayFeatureExtractor", domain=ML)
def lower_array_feature_extractor(ctx) -> None:
    """Z[..., j] = X[..., Y[j]] (onnxruntime: a 1-D X gives [1, K]); an index outside X's last dim gives 0."""
    x, idx = ctx.inputs[0], ctx.inputs[1]
    F = _last_dim(ctx)
    K = idx.numel  # (symbolic too: skl2onnx picks class labels with a per-row argmax, Y of [N])
    lead = tuple(x.shape[:-1]) if x.rank > 1 else (1,)
    out = ctx.output(0, x.dtype, (*lead, K))
    if out.numel == 0:
        return
    zero = "0.0" if x.dtype in ("float32", "float64") else _literal(0, x.dtype) if x.dtype in ("int64", "int32") else None
    if zero is None:
        raise ctx.unsupported(f"input type {x.dtype}")
    ctx.dispatch("ml.wgsl.j2", {"x": ctx.gpu(x), "idx": ctx.gpu(idx)}, {"out": out}, work=out.numel,
                 params={"n": out.numel, "K": K, "F": F}, op="extract", zero=zero)


@lowering("OneHotEncoder", domain=ML)
def lower_one_hot_encoder(ctx) -> None:
    """Y[..., c] = 1 where X == cats_int64s[c]: an unknown category gives a row of zeros (with ``zeros=0``
    onnxruntime fails the run instead; a GPU kernel cannot)."""
    x = ctx.inputs[0]
    if ctx.attr("cats_strings"):
        raise ctx.unsupported("string categories (cats_strings): webinfer has no string tensors")
    cats = int_labels(ctx, ctx.attr("cats_int64s") or [])
    if not cats.size:
        raise ctx.unsupported("no categories")
    if x.dtype not in ("float32", "float64", "int64", "int32"):
        raise ctx.unsupported(f"input type {x.dtype}")
    C = int(cats.size)
    out = ctx.output(0, "float32", (*x.shape, C))
    if out.numel == 0:
        return
    ctx.dispatch("ml.wgsl.j2", {"x": ctx.gpu(x), "cats": ctx.gpu(ctx._l.constant(cats))}, {"out": out},
                 work=out.numel, params={"n": out.numel, "C": C}, op="onehot",
                 float_in=x.dtype in ("float32", "float64"))


@lowering("Normalizer", domain=ML)
def lower_normalizer(ctx) -> None:
    x = ctx.inputs[0]
    norm = text(ctx.attr("norm"), "MAX")
    if norm not in ("MAX", "L1", "L2"):
        raise ctx.unsupported(f"norm {norm!r}")
    rows, F = rows_features(ctx, x)
    out = ctx.output(0, "float32", x.shape)
    if out.numel == 0:
        return
    ctx.dispatch("ml.wgsl.j2", {"x": ctx.gpu(x)}, {"out": out}, work=rows, params={"n": rows, "F": F},
                 op="normalize", norm=norm)


_LABEL_DTYPES = {"keys_int64s": "int64", "keys_floats": "float32", "values_int64s": "int64", "values_floats": "float32"}


def _label_table(ctx, kind: str):
    """(values, dtype) of LabelEncoder's ``keys`` or ``values``; strings refused in one line."""
    if ctx.attr(f"{kind}_strings"):
        what = "string keys with a string input" if kind == "keys" else "string values"
        raise ctx.unsupported(f"{what}: webinfer has no string tensors")
    tensor = ctx.attr(f"{kind}_tensor")
    if tensor is not None:
        if tensor.dtype.kind not in "iuf":
            raise ctx.unsupported(f"{kind}_tensor of type {tensor.dtype}: webinfer has no string tensors")
        return tensor.reshape(-1), "float32" if tensor.dtype.kind == "f" else "int64"
    for attr in (f"{kind}_int64s", f"{kind}_floats"):
        if ctx.attr(attr):
            return np.asarray(ctx.attr(attr)), _LABEL_DTYPES[attr]
    raise ctx.unsupported(f"no {kind}")


@lowering("LabelEncoder", domain=ML)
def lower_label_encoder(ctx) -> None:
    """Numeric keys -> numeric values by a linear search of the key table (models carry few labels)."""
    x = ctx.inputs[0]
    if x.dtype not in ("float32", "float64", "int64", "int32", "int16"):
        what = "a string input" if x.dtype in ("object", "str", "string") else f"an input of type {x.dtype}"
        raise ctx.unsupported(f"{what}: webinfer has no string tensors (string keys are not supported)")
    keys, key_dt = _label_table(ctx, "keys")
    vals, val_dt = _label_table(ctx, "values")
    if len(keys) != len(vals):
        raise ctx.unsupported(f"{len(keys)} keys for {len(vals)} values")
    tensor_default = ctx.attr("default_tensor")
    if tensor_default is not None:
        default = float(np.asarray(tensor_default).reshape(-1)[0])
        out_dt = str(np.asarray(ctx.attr("values_tensor")).dtype) if ctx.attr("values_tensor") is not None else val_dt
    else:
        default = float(ctx.attr("default_float", -0.0)) if val_dt == "float32" else float(ctx.attr("default_int64", -1))
        out_dt = val_dt
    key_arr = keys.astype(np.float32) if key_dt == "float32" else int_labels(ctx, keys)
    val_arr = vals.astype(np.float32) if val_dt == "float32" else int_labels(ctx, vals)
    if (key_dt == "float32") != (x.dtype in ("float32", "float64")):
        raise ctx.unsupported(f"{key_dt} keys for a {x.dtype} input")
    gpu_out = "float32" if val_dt == "float32" else "int64"
    _elementwise(ctx, "lookup", out_dt if out_dt in ("float32", "float64", "int64", "int32", "int16") else gpu_out,
                 {"keys": ctx.gpu(ctx._l.constant(key_arr)), "vals": ctx.gpu(ctx._l.constant(val_arr))},
                 {"K": len(key_arr)}, float_keys=key_dt == "float32", default=_literal(default, gpu_out))


@lowering("FeatureVectorizer", domain=ML)
def lower_feature_vectorizer(ctx) -> None:
    """Inputs [N, C_i] side by side as float columns, each cut or zero-padded to inputdimensions[i] (a 1-D input
    is one row, as onnxruntime reads it)."""
    from ... import dims as D
    from .. import emit

    widths = [int(d) for d in ctx.attr("inputdimensions") or []]
    xs = [t for t in ctx.inputs if t is not None]
    if len(widths) != len(xs) or not xs:
        raise ctx.unsupported(f"{len(widths)} inputdimensions for {len(xs)} inputs")
    rows = xs[0].shape[0] if xs[0].rank == 2 else 1
    out = ctx.output(0, "float32", (rows, sum(widths)))
    off = 0
    for x, width in zip(xs, widths):
        if x.rank not in (1, 2):
            raise ctx.unsupported("inputs [N, C] or [C] with a static C")
        cols = x.shape[-1]
        if not isinstance(cols, int):
            raise ctx.unsupported("inputs [N, C] or [C] with a static C")
        if width:
            n = D.mul(rows, width)
            ctx.dispatch("ml.wgsl.j2", {"x": ctx.gpu(x)}, {"out": out}, work=n,
                         params={"n": n, "D": width, "C": cols, "W": sum(widths), "off": emit.offset(off, "u32")},
                         op="place")
        off += width

