"""TfIdfVectorizer against onnx.reference: random token rows, pools of uni/bi/trigrams (one repeated), every
mode with and without weights, skip counts and gram-length windows."""

import numpy as np
import pytest
from onnx import helper
from oprefs import check_node, make_model

from webinfer.backend import WebinferRep

rng = np.random.default_rng(0)
POOL = [2, 3, 5, 4, 5, 6, 7, 8, 6, 7, 2, 3, 3, 2, 3, 2]  # 4 unigrams, 3 bigrams (+ (2, 3)), 2 trigrams
COUNTS = [0, 4, 10]
INDEXES = [0, 1, 2, 3, 4, 5, 6, 7, 8, 3]


@pytest.mark.parametrize("mode,weighted", [("TF", False), ("IDF", False), ("IDF", True), ("TFIDF", True)])
@pytest.mark.parametrize("lo,hi,skip", [(1, 3, 0), (2, 2, 3), (1, 2, 5)])
def test_tfidf(mode, weighted, lo, hi, skip):
    x = rng.integers(2, 9, (3, 11)).astype(np.int64)
    attrs = dict(mode=mode, min_gram_length=lo, max_gram_length=hi, max_skip_count=skip, ngram_counts=COUNTS,
                 ngram_indexes=INDEXES, pool_int64s=POOL)
    if weighted:
        attrs["weights"] = list(rng.random(9).astype(np.float32))
    if mode == "IDF" and not weighted:  # onnx.reference fails here (len(None)); the spec: 1 where counted
        (tf,), _, _, _ = check_node("TfIdfVectorizer", {"x": x}, opset=9, **(attrs | {"mode": "TF"}))
        model = make_model([helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)], {"x": x}, ["y"], opset=9)
        np.testing.assert_array_equal(WebinferRep(model).run({"x": x})[0], (tf > 0).astype(np.float32))
        return
    _, _, _, gpu = check_node("TfIdfVectorizer", {"x": x}, opset=9, **attrs)
    assert gpu
    check_node("TfIdfVectorizer", {"x": x[0].astype(np.int32)}, opset=9, **attrs)
