"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss against onnx.reference, on random shapes."""

import numpy as np
import pytest
from oprefs import check_node

rng = np.random.default_rng(0)


def _case(shape, ignore=None, weighted=False):
    n, c = shape[0], shape[1]
    x = rng.standard_normal(shape).astype(np.float32)
    t = rng.integers(0, c, (n, *shape[2:])).astype(np.int64)
    if ignore is not None:
        t.reshape(-1)[::3] = ignore
    inits = {"w": rng.random(c).astype(np.float32) + 0.1} if weighted else {}
    return x, t, inits


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("shape,ignore,weighted", [((3, 5), None, False), ((2, 4, 3, 2), 1, True),
                                                    ((4, 3, 7), -5, False), ((2, 6, 1, 3, 2), None, True)])
def test_nll_loss(reduction, shape, ignore, weighted):
    x, t, inits = _case(shape, ignore, weighted)
    attrs = {"reduction": reduction} | ({"ignore_index": ignore} if ignore is not None else {})
    _, _, _, gpu = check_node("NegativeLogLikelihoodLoss", {"x": x, "t": t}, initializers=inits, **attrs)
    assert gpu


@pytest.mark.parametrize("reduction", ["none", "mean"])
@pytest.mark.parametrize("target", ["software", "gpu"])
def test_softmax_cross_entropy(reduction, target):
    x, t, inits = _case((3, 10, 40), ignore=2, weighted=True)  # 120 targets: the GPU class reduces in a workgroup
    check_node("SoftmaxCrossEntropyLoss", {"x": x, "t": t}, n_outputs=2, initializers=inits, target=target,
               reduction=reduction, ignore_index=2)
    check_node("SoftmaxCrossEntropyLoss", {"x": x, "t": t}, target=target, reduction=reduction)


def test_weights_as_input_and_all_ignored():
    x, t, _ = _case((2, 3, 4))
    w = rng.random(3).astype(np.float32)
    check_node("NegativeLogLikelihoodLoss", {"x": x, "t": t, "w": w}, reduction="sum")
    t[:] = 1  # every target ignored: mean is 0 / 0 = NaN, as in the reference
    check_node("NegativeLogLikelihoodLoss", {"x": x, "t": t}, reduction="mean", ignore_index=1)
