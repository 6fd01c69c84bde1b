"""The classic-ML heads shared by ai.onnx.ml's classifiers and regressors (linear, trees): raw scores -> the
score output onnxruntime writes (post_transform) and the label, on the GPU (shaders/ml_head.wgsl.j2).

A classifier's labels are a table the head indexes (int64 labels as i32): string labels never reach here,
graph/ml_outputs.py turned them into class indices whose names the run side maps at output time.
"""

from __future__ import annotations

import numpy as np

from ...dtypes import I32_MAX, I32_MIN

POST_TRANSFORMS = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT")


def text(value, default: str = "") -> str:
    """A string attribute as text (onnx-ir gives str or bytes)."""
    if value is None:
        return default
    return value.decode() if isinstance(value, bytes) else str(value)


def post_transform(ctx, value=None) -> str:
    """The node's post_transform (its ai.onnx.ml v5 integer form too), checked."""
    post = ctx.attr("post_transform", "NONE") if value is None else value
    post = POST_TRANSFORMS[[0, 2, 1, 3, 4][post]] if isinstance(post, int) else text(post, "NONE")
    if post not in POST_TRANSFORMS:
        raise ctx.unsupported(f"post_transform {post!r}")
    return post


def int_labels(ctx, values) -> np.ndarray:
    """Class labels as the i32 table the head reads (int64 labels must fit in 32 bits on the GPU)."""
    labels = np.asarray(list(values), np.int64)
    if labels.size and (labels.min() < I32_MIN or labels.max() > I32_MAX):
        raise ctx.unsupported("class labels outside the 32-bit range (int64 lives as i32 on the GPU)")
    return labels.astype(np.int32)


def class_labels(ctx, strings_attr: str, ints_attr: str) -> np.ndarray:
    """The classifier's int labels; string labels are refused here (graph/ml_outputs.py replaces them by indices
    when the label is only a graph output)."""
    if ctx.attr(strings_attr):
        raise ctx.unsupported(f"string class labels ({strings_attr}) feed other nodes: webinfer has no string "
                              "tensors (they are supported when the label is a graph output)")
    return int_labels(ctx, ctx.attr(ints_attr) or [])


def run_head(ctx, raw, rows, *, kind: str, post: str, z_cols: int, labels: np.ndarray | None = None,
             has=None, base: np.ndarray | None = None, binary_case: bool = False, all_positive: bool = False,
             dtype: str = "float32", z_output: int | None = None) -> None:
    """Dispatch the head over ``rows`` rows of ``raw`` ([rows, T] f32): writes output 1 (Z, [rows, z_cols], or
    output 0 for a regressor, or ``z_output``) and, with ``labels``, output 0 (the label, int64 [rows])."""
    T = int(raw.shape[-1]) if raw.shape else 1
    reads = {"raw": ctx.gpu(raw)}
    if has is not None:
        reads["has"] = ctx.gpu(has)
    if base is not None and len(base):
        reads["bv"] = ctx.gpu(ctx._l.constant(np.asarray(base, np.float32)))
    writes = {}
    if labels is not None:
        reads["lbl"] = ctx.gpu(ctx._l.constant(labels if len(labels) else np.zeros(1, np.int32)))
        writes["label"] = ctx.output(0, "int64", (rows,))
        writes["z"] = ctx.output(1, "float32", (rows, z_cols))
    else:  # a regressor's values (output 0), or ``z_output``: the scores of a classifier that set its label
        writes["z"] = ctx.output(z_output or 0, dtype, (rows, z_cols))
    params = {"rows": rows, "T": T, "Z": z_cols, "B": len(base) if base is not None else 0}
    ctx.dispatch("ml_head.wgsl.j2", reads, writes, work=rows, params=params, wg=64, kind=kind, post=post,
                 labels=labels is not None, has_flags=has is not None, base="bv" in reads,
                 base_count=len(base) if base is not None else 0, binary_case=binary_case, all_positive=all_positive)
