"""RNN, GRU, LSTM (default activations) against onnx.reference: directions, layouts, optional inputs."""

import numpy as np
import pytest
from oprefs import check_node

rng = np.random.default_rng(0)
G = {"RNN": 1, "GRU": 3, "LSTM": 4}


def f(*shape):
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward"])
def test_recurrent(op, direction):
    d, h, t, b, i = (2 if direction == "bidirectional" else 1), 4, 3, 2, 5
    feeds = {"x": f(t, b, i), "w": f(d, G[op] * h, i), "r": f(d, G[op] * h, h), "b": f(d, 2 * G[op] * h)}
    outs = 2
    _, _, _, gpu = check_node(op, feeds, n_outputs=outs, opset=14, hidden_size=h, direction=direction)
    assert gpu
