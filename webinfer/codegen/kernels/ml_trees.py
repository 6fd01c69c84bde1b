"""ai.onnx.ml tree ensembles: TreeEnsembleClassifier / TreeEnsembleRegressor (v1-v3 attributes) and TreeEnsemble
(v5), as scikit-learn, LightGBM and XGBoost converters emit them. The trees become two weight buffers at build
time (node records and leaf weights, shaders/ml_tree.wgsl.j2); one invocation per (row, target) walks every
tree. A classifier's label and post-transform run in the shared head (``_ml_head``), with onnxruntime's rules
for two classes.
"""

from __future__ import annotations

import numpy as np

from ..registry import lowering
from ._ml_head import class_labels, int_labels, post_transform, run_head, text
from .ml_linear import ML, rows_features

_MODES = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3, "BRANCH_EQ": 4, "BRANCH_NEQ": 5,
          "BRANCH_MEMBER": 6, "LEAF": 7}
_AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")


def _bits(values) -> np.ndarray:
    return np.asarray(values, np.float32).reshape(-1).view(np.int32)


def _floats(ctx, name: str):
    """A float list attribute, or its ``_as_tensor`` form (v3)."""
    v = ctx.attr(name)
    if v is None or (not isinstance(v, np.ndarray) and not v):
        v = ctx.attr(f"{name}_as_tensor")
    return None if v is None else np.asarray(v, np.float64).reshape(-1)


class Forest:
    """Node records and leaf weights in the layout the kernel walks (see the shader's header)."""

    def __init__(self):
        self.records: list[list[int]] = []  # feature, mode, threshold bits, true, false, missing, first, count
        self.roots: list[int] = []
        self.sets: list[float] = []  # member-set values (v5): a record's first and count index them
        self.leaf: list[tuple[int, float]] = []

    def buffers(self) -> tuple[np.ndarray, np.ndarray]:
        """Four i32 per record (16 bytes: a LightGBM model of 4.8 M nodes fits one 128 MiB binding)."""
        R = len(self.roots)
        recs = np.asarray(self.records, np.int64).reshape(-1, 8)
        if (recs[:, 0] < 0).any() or (recs[:, 0] >= 1 << 24).any():
            raise ValueError("feature ids must be below 2**24")
        words = np.empty((len(recs), 4), np.int64)
        words[:, 0] = recs[:, 0] | recs[:, 1] << 24 | (recs[:, 5] != 0) << 27
        words[:, 1:3] = recs[:, 2:4]
        words[:, 3] = recs[:, 4]
        leaf, member = recs[:, 1] == 7, recs[:, 1] == 6
        words[leaf, 2], words[leaf, 3] = recs[leaf, 6], recs[leaf, 7]  # a leaf: its first weight and count
        sets: list[np.ndarray] = []
        at = R + 4 * len(recs)
        for k in np.nonzero(member)[0]:  # a member set: [count, values...] after the records, by threshold
            first, count = int(recs[k, 6]), int(recs[k, 7])
            words[k, 1] = at
            sets += [np.array([count], np.int32), _bits(self.sets[first:first + count])]
            at += 1 + count
        tree = np.concatenate([np.asarray(self.roots, np.int32), words.astype(np.int32).reshape(-1), *sets])
        leaf = np.array([[t, 0] for t, _ in self.leaf] or [[0, 0]], np.int32)
        leaf[: len(self.leaf), 1] = _bits([w for _, w in self.leaf]) if self.leaf else 0
        return tree, leaf.reshape(-1)


def _ints(ctx, name: str, n: int | None = None) -> np.ndarray:
    v = ctx.attr(name)
    return np.zeros(n or 0, np.int64) if v is None or len(v) == 0 and n else np.asarray(v, np.int64).reshape(-1)


def forest_v3(ctx, prefix: str) -> Forest:
    """v1-v3 attributes (nodes_*, and ``prefix``_treeids/nodeids/ids/weights for the leaves), vectorized: a
    LightGBM export carries millions of nodes (PyPI luscinia: 4.8 M), which a loop per node takes minutes on."""
    tree_ids, node_ids = _ints(ctx, "nodes_treeids"), _ints(ctx, "nodes_nodeids")
    n = len(node_ids)
    raw_modes = ctx.attr("nodes_modes") or []
    names, mode_of = np.unique(np.asarray(raw_modes), return_inverse=True)  # (str or bytes: onnx-ir gives either)
    names = [text(m) for m in names.tolist()]
    values = _floats(ctx, "nodes_values")
    values = np.zeros(n) if values is None else values
    feats = _ints(ctx, "nodes_featureids", n)
    true_ids, false_ids = _ints(ctx, "nodes_truenodeids", n), _ints(ctx, "nodes_falsenodeids", n)
    missing = _ints(ctx, "nodes_missing_value_tracks_true", n)
    if not n or any(len(a) != n for a in (tree_ids, mode_of, values, feats, true_ids, false_ids, missing)):
        raise ctx.unsupported("node attributes of different lengths")
    if any(m not in _MODES or m == "BRANCH_MEMBER" for m in names):
        raise ctx.unsupported(f"node modes {sorted(set(names) - set(_MODES))}")
    modes = np.array([_MODES[m] for m in names], np.int64)[mode_of.reshape(-1)]
    span = int(max(node_ids.max(), true_ids.max(), false_ids.max(), 0)) + 1
    keys = tree_ids * span + node_ids
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]

    def where(trees, ids, what: str) -> np.ndarray:
        """Record indices of (tree, node id) pairs (the last node of equal pairs, as a dict keeps it)."""
        want = trees * span + ids
        pos = np.clip(np.searchsorted(sorted_keys, want, side="right") - 1, 0, n - 1)
        bad = (sorted_keys[pos] != want) | (ids < 0) | (ids >= span)
        if bad.any():
            k = int(np.argmax(bad))
            raise ctx.unsupported(f"{what} {int(ids[k])} of tree {int(trees[k])}, which does not exist")
        return order[pos]

    leaf = modes == _MODES["LEAF"]
    inner = np.nonzero(~leaf)[0]
    rec = np.zeros((n, 8), np.int64)
    rec[:, 0], rec[:, 1], rec[:, 2], rec[:, 5] = feats, modes, _bits(values), missing
    rec[inner, 3] = where(tree_ids[inner], true_ids[inner], "a child: node")
    rec[inner, 4] = where(tree_ids[inner], false_ids[inner], "a child: node")
    w_vals = _floats(ctx, f"{prefix}_weights")
    w_nodes = where(_ints(ctx, f"{prefix}_treeids"), _ints(ctx, f"{prefix}_nodeids"), "a weight on node")
    w_ids = _ints(ctx, f"{prefix}_ids")
    w_vals = np.zeros(0) if w_vals is None else w_vals
    if not len(w_nodes) == len(w_ids) == len(w_vals):
        raise ctx.unsupported(f"{prefix} weight attributes of different lengths")
    by_node = np.argsort(w_nodes, kind="stable")  # each node's weights in attribute order, nodes in record order
    rec[:, 6] = np.searchsorted(w_nodes[by_node], np.arange(n))
    rec[:, 7] = np.bincount(w_nodes, minlength=n)
    forest = Forest()
    forest.records = rec
    forest.leaf = list(zip(w_ids[by_node].tolist(), w_vals[by_node].tolist()))
    is_child = np.zeros(n, bool)
    is_child[rec[inner, 3]] = is_child[rec[inner, 4]] = True
    cand = np.nonzero(~is_child)[0]  # a tree's root: its first node that no node points at
    _, first = np.unique(tree_ids[cand], return_index=True)
    forest.roots = cand[np.sort(first)].tolist()
    return forest


def forest_v5(ctx) -> Forest:
    """TreeEnsemble (ai.onnx.ml v5): interior nodes, then one LEAF record per leaf (its target and weight)."""
    feats = list(ctx.attr("nodes_featureids") or [])
    n = len(feats)
    splits = _floats(ctx, "nodes_splits")
    modes = np.asarray(ctx.attr("nodes_modes"), np.int64).reshape(-1)
    true_ids, false_ids = ctx.attr("nodes_truenodeids"), ctx.attr("nodes_falsenodeids")
    true_leaf, false_leaf = ctx.attr("nodes_trueleafs"), ctx.attr("nodes_falseleafs")
    missing = ctx.attr("nodes_missing_value_tracks_true") or [0] * n
    targets, leaf_w = ctx.attr("leaf_targetids") or [], _floats(ctx, "leaf_weights")
    if splits is None or leaf_w is None or any(len(a) != n for a in (splits, modes, true_ids, false_ids, true_leaf,
                                                                     false_leaf, missing)):
        raise ctx.unsupported("node attributes of different lengths")
    if len(targets) != len(leaf_w) or (modes > 6).any() or (modes < 0).any():
        raise ctx.unsupported("leaf attributes of different lengths, or an unknown node mode")
    members = list(_floats(ctx, "membership_values") if ctx.attr("membership_values") is not None else [])
    forest = Forest()
    for k in range(n):
        rec = [int(feats[k]), int(modes[k]), int(_bits([splits[k]])[0]),
               int(true_ids[k]) + (n if true_leaf[k] else 0), int(false_ids[k]) + (n if false_leaf[k] else 0),
               int(missing[k]), 0, 0]
        if modes[k] == 6:  # the next NaN-terminated set of membership_values
            end = next((j for j in range(len(members)) if np.isnan(members[j])), len(members))
            rec[6], rec[7] = len(forest.sets), end
            forest.sets.extend(members[:end])
            members = members[end + 1:]
        forest.records.append(rec)
    for i, (t, w) in enumerate(zip(targets, leaf_w)):
        forest.records.append([0, 7, 0, 0, 0, 0, i, 1])
        forest.leaf.append((int(t), float(w)))
    forest.roots = [int(r) for r in ctx.attr("tree_roots") or []]
    if not forest.roots or max(forest.roots) >= n:
        raise ctx.unsupported("tree_roots outside the nodes")
    return forest


LOOP_BUDGET = 16384  # walk steps an invocation may take: llvmpipe's loop limiter (LP_MAX_TGSI_LOOP_ITERATIONS)
# stops an invocation's loops after some 30,000 back-edges in all (measured: 600 trees of 42 steps pass, 800 not)


def tree_ranges(forest: Forest, budget: int = LOOP_BUDGET) -> list[tuple[int, int]]:
    """Consecutive tree ranges, each walked by one dispatch within ``budget`` walk steps an invocation: a
    tree costs its outer iteration, its longest path (set members included) and its most leaf weights."""
    recs = np.asarray(forest.records, np.int64).reshape(-1, 8)
    n_trees = len(forest.roots)
    cost = np.ones(n_trees, np.int64)
    nodes, trees = np.asarray(forest.roots, np.int64), np.arange(n_trees)
    path = np.zeros(n_trees, np.int64)
    for _ in range(4096):  # levels (a malformed forest with a cycle stops here, its trees costed at the budget)
        if not len(nodes):
            break
        mode = recs[nodes, 1]
        leaf = mode == 7
        np.maximum.at(cost, trees[leaf], path[leaf] + 1 + recs[nodes[leaf], 7])
        step = 1 + np.where(mode == 6, recs[nodes, 7], 0)
        inner = ~leaf
        nodes, trees = np.concatenate([recs[nodes[inner], 3], recs[nodes[inner], 4]]), np.tile(trees[inner], 2)
        path = np.tile((path + step)[inner], 2)
    else:
        np.maximum.at(cost, trees, budget)
    ranges, start, used = [], 0, 0
    for t, c in enumerate(cost.tolist()):
        if used and used + c > budget:
            ranges.append((start, t))
            start, used = t, 0
        used += c
    return ranges + [(start, n_trees)]


def walk(ctx, forest: Forest, x, rows, features, targets: int, agg: str, base=None, has: bool = False,
         dtype: str = "float32"):
    """raw [rows, targets] (and the has-scored flags) from the trees, in tree ranges (``tree_ranges``)."""
    try:
        tree, leaf = forest.buffers()
    except ValueError as e:
        raise ctx.unsupported(str(e)) from None
    reads = {"x": ctx.gpu(x), "tree": ctx.gpu(ctx._l.constant(tree)), "leaf": ctx.gpu(ctx._l.constant(leaf))}
    if base is not None and len(base):
        reads["bv"] = ctx.gpu(ctx._l.constant(np.asarray(base, np.float32)))
    ranges = tree_ranges(forest)
    carried = None
    for k, (t0, t1) in enumerate(ranges):
        last = k == len(ranges) - 1
        writes = {"out": ctx.temp(dtype if last else "float32", (rows, targets))}
        if has or not last:
            writes["has"] = ctx.temp("float32", (rows, targets))
        step_reads = dict(reads, **({"pacc": carried["out"], "phas": carried["has"]} if carried else {}))
        params = {"n": writes["out"].numel, "T": targets, "F": features, "NT": len(forest.roots),
                  "NN": len(forest.records) + 1, "R": len(forest.roots), "B": 0 if base is None else len(base),
                  "T0": t0, "T1": t1}
        ctx.dispatch("ml_tree.wgsl.j2", step_reads, writes, work=writes["out"].numel, params=params, agg=agg,
                     base="bv" in reads, has_out="has" in writes, carry=carried is not None, last=last)
        carried = writes
    return carried["out"], carried.get("has")


def _regress(ctx, forest: Forest, targets: int, agg: str, post: str, base, dtype: str = "float32") -> None:
    x = ctx.inputs[0]
    rows, features = rows_features(ctx, x)
    raw, _ = walk(ctx, forest, x, rows, features, targets, agg, base, dtype=dtype)
    if post == "NONE":
        ctx._set(0, raw)
        return
    run_head(ctx, raw, rows, kind="multi" if targets > 1 else "single", post=post, z_cols=targets, dtype=dtype)


@lowering("TreeEnsembleRegressor", domain=ML)
def lower_tree_regressor(ctx) -> None:
    agg = text(ctx.attr("aggregate_function"), "SUM")
    if agg not in _AGGREGATES:
        raise ctx.unsupported(f"aggregate_function {agg!r}")
    _regress(ctx, forest_v3(ctx, "target"), int(ctx.attr("n_targets", 1)), agg, post_transform(ctx),
             _floats(ctx, "base_values"))


@lowering("TreeEnsemble", domain=ML)
def lower_tree_ensemble(ctx) -> None:
    agg = int(ctx.attr("aggregate_function", 1))
    if not 0 <= agg < 4:
        raise ctx.unsupported(f"aggregate_function {agg}")
    dtype = ctx.inputs[0].dtype if ctx.inputs[0].dtype in ("float64", "float16") else "float32"  # (v5: Y is X's T)
    _regress(ctx, forest_v5(ctx), int(ctx.attr("n_targets")), _AGGREGATES[agg], post_transform(ctx), None, dtype)


@lowering("TreeEnsembleClassifier", domain=ML)
def lower_tree_classifier(ctx) -> None:
    x = ctx.inputs[0]
    rows, features = rows_features(ctx, x)
    labels = class_labels(ctx, "classlabels_strings", "classlabels_int64s")
    C = len(labels)
    if C < 2:
        raise ctx.unsupported("fewer than two class labels")
    forest = forest_v3(ctx, "class")
    ids = {c for c, _ in forest.leaf}
    if any(not 0 <= c < C for c in ids):
        raise ctx.unsupported("class_ids outside the class labels")
    base = _floats(ctx, "base_values")
    base = None if base is None or not len(base) else base
    raw, has = walk(ctx, forest, x, rows, features, C, "SUM", has=True)
    post = post_transform(ctx)
    if C > 2:
        run_head(ctx, raw, rows, kind="multi", post=post, z_cols=C, labels=labels, has=has, base=base)
        return
    table = int_labels(ctx, [*labels, 0, 1])  # [negative, positive, then the literal 0 / 1 onnxruntime returns]
    run_head(ctx, raw, rows, kind="tree_binary", post=post, z_cols=2, labels=table, has=has, base=base,
             binary_case=len(ids) == 1, all_positive=all(w >= 0 for _, w in forest.leaf))
