"""Deep tree ensembles for tests/ml: paths with a leaf off every node, as gradient boosting grows them."""

from __future__ import annotations


def caterpillar_forest(n_trees: int, depth: int, features: int, prefix: str, rng) -> dict:
    """``n_trees`` trees of ``depth`` BRANCH_LEQ nodes in a path, each with a leaf on its false side; rows whose
    features are small walk to the bottom, others leave early (divergent walks in one workgroup)."""
    attrs = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
                             "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true",
                             f"{prefix}_treeids", f"{prefix}_nodeids", f"{prefix}_ids", f"{prefix}_weights")}

    def add(t, i, feature, mode, value, true_id, false_id):
        for k, v in zip(("treeids", "nodeids", "featureids", "modes", "values", "truenodeids", "falsenodeids",
                         "missing_value_tracks_true"), (t, i, feature, mode, value, true_id, false_id, 0)):
            attrs[f"nodes_{k}"].append(v)

    for t in range(n_trees):
        for d in range(depth):  # node 2d: the test, 2d + 1: the leaf off it, 2d + 2: the next test (or last leaf)
            add(t, 2 * d, int(rng.integers(features)), "BRANCH_LEQ", float(1.0 - 1.5 * d / depth), 2 * d + 2, 2 * d + 1)
            add(t, 2 * d + 1, 0, "LEAF", 0.0, 0, 0)
        add(t, 2 * depth, 0, "LEAF", 0.0, 0, 0)
        for leaf in [2 * d + 1 for d in range(depth)] + [2 * depth]:
            for k, v in zip(("treeids", "nodeids", "ids", "weights"), (t, leaf, 0, float(rng.standard_normal()) * 0.01)):
                attrs[f"{prefix}_{k}"].append(v)
    return attrs
