"""webinfer.TokenLogprobs against numpy: the sampled token's log-softmax value and the top k (values and ids,
lowest id first on ties), and nothing computed when k is 0xffffffff (the generator's default)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import webinfer

TOP = 20


@pytest.fixture(scope="module")
def logprobs(tmp_path_factory):
    vocab = 1000
    node = helper.make_node("TokenLogprobs", ["logits", "tok", "k"], ["lp"], domain="webinfer")
    graph = helper.make_graph([node], "lp", [
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1, vocab]),
        helper.make_tensor_value_info("tok", TensorProto.INT32, [1]),
        helper.make_tensor_value_info("k", TensorProto.UINT32, [1])],
        [helper.make_tensor_value_info("lp", TensorProto.FLOAT, [1 + 2 * TOP])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("webinfer", 1)])
    out = tmp_path_factory.mktemp("lp") / "lp.wi"
    webinfer.build(model, str(out))
    sess = webinfer.InferenceSession(str(out))

    def run(x, token, k):
        feeds = {"logits": np.asarray(x, np.float32).reshape(1, 1, -1), "tok": np.array([token], np.int32),
                 "k": np.array([k], np.uint32)}
        return sess.run(None, feeds)[0]

    return vocab, run


def test_logprobs_match_numpy(logprobs):
    vocab, run = logprobs
    rng = np.random.default_rng(1)
    for k in (0, 1, 5, 20):
        x = (rng.standard_normal(vocab) * 4).astype(np.float32)
        x[[11, 3, 500]] = x.max() + 0.5  # a three-way tie at the top: ids 3, 11, 500 in that order
        x[rng.integers(0, vocab, 50)] = -np.inf  # masked tokens
        token = int(rng.integers(0, vocab))
        while not np.isfinite(x[token]):
            token = int(rng.integers(0, vocab))
        x64 = x.astype(np.float64)
        m = x64.max()
        ref = x64 - m - np.log(np.exp(x64 - m).sum())
        order = np.lexsort((np.arange(vocab), -x64))[:k]
        got = run(x, token, k)
        np.testing.assert_allclose(got[0], ref[token], atol=1e-5)
        np.testing.assert_allclose(got[1:1 + k], ref[order], atol=1e-5)
        assert got[1 + TOP:1 + TOP + k].astype(int).tolist() == order.tolist()
        if k >= 3:
            assert order[:3].tolist() == [3, 11, 500]


def test_logprobs_off_writes_nothing(logprobs):
    vocab, run = logprobs
    run(np.arange(vocab, dtype=np.float32), 0, 3)  # log p(token 0) = about -999
    off = run(np.zeros(vocab, np.float32), 1, 0xFFFFFFFF)  # would be -log(vocab) if it were computed
    assert off[0] != pytest.approx(-np.log(vocab), abs=1e-3)
