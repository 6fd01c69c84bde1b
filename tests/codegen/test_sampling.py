"""webinfer.SampleToken against numpy implementations of transformers' logits processors: repetition
penalty, greedy argmax, temperature, top-k, top-p (nucleus), and the sampled frequencies."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import webinfer

P = 16  # penalty list length


@pytest.fixture(scope="module")
def sampler(tmp_path_factory):
    cache = {}

    def get(vocab: int):
        if vocab not in cache:
            node = helper.make_node("SampleToken", ["logits", "sp", "seed", "pen"], ["tok"], domain="webinfer")
            graph = helper.make_graph([node], "sample", [
                helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1, vocab]),
                helper.make_tensor_value_info("sp", TensorProto.FLOAT, [4]),
                helper.make_tensor_value_info("seed", TensorProto.UINT32, [2]),
                helper.make_tensor_value_info("pen", TensorProto.INT32, [P]),
            ], [helper.make_tensor_value_info("tok", TensorProto.INT32, [1])])
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20),
                                                            helper.make_opsetid("webinfer", 1)])
            out = tmp_path_factory.mktemp("sample") / f"v{vocab}.wi"
            webinfer.build(model, str(out))
            cache[vocab] = webinfer.InferenceSession(str(out))
        sess = cache[vocab]

        def run(logits, temperature=0.0, top_k=0, top_p=1.0, penalty=1.0, pen_ids=(), seed=0, step=0):
            pen = np.full(P, -1, np.int32)
            pen[: len(pen_ids)] = pen_ids
            feeds = {"logits": np.asarray(logits, np.float32).reshape(1, 1, -1),
                     "sp": np.array([temperature, top_k, top_p, penalty], np.float32),
                     "seed": np.array([seed, step], np.uint32), "pen": pen}
            return int(sess.run(None, feeds)[0][0])

        return run

    return get


def penalized(logits, penalty, ids):
    """transformers' RepetitionPenaltyLogitsProcessor."""
    x = np.array(logits, np.float32)
    ids = np.unique(np.array(ids, np.int64))
    if len(ids):
        v = x[ids]
        x[ids] = np.where(v > 0, v / penalty, v * penalty)
    return x


def allowed(logits, temperature, top_k, top_p):
    """transformers' TopK then TopP warpers: the set of token ids that may be drawn, and their probabilities."""
    x = np.array(logits, np.float64) / temperature
    keep = np.ones_like(x, bool)
    if 0 < top_k < len(x):
        keep &= x >= np.sort(x)[-top_k]
    p = np.where(keep, np.exp(x - x.max()), 0.0)
    p /= p.sum()
    if top_p < 1.0:
        order = np.argsort(p, kind="stable")
        cum = np.cumsum(p[order])
        remove = cum <= 1 - top_p
        remove[-1] = False
        keep[order[remove]] = False
        p = np.where(keep, p, 0.0)
        p /= p.sum()
    return set(np.flatnonzero(keep).tolist()), p


@pytest.mark.parametrize("vocab", [7, 1000, 49152])
def test_greedy_is_argmax(sampler, vocab):
    rng = np.random.default_rng(vocab)
    run = sampler(vocab)
    for _ in range(3):
        logits = rng.normal(size=vocab).astype(np.float32) * 3
        assert run(logits) == int(np.argmax(logits))
    ties = np.zeros(vocab, np.float32)
    ties[[vocab // 2, vocab - 1]] = 5.0
    assert run(ties) == vocab // 2  # lowest index on ties, like numpy


def test_repetition_penalty(sampler):
    run = sampler(1000)
    rng = np.random.default_rng(1)
    logits = rng.normal(size=1000).astype(np.float32)
    top = np.argsort(logits)[::-1][:5]
    ids = [int(top[0]), int(top[1]), int(top[0])]  # duplicates count once
    want = int(np.argmax(penalized(logits, 3.0, ids)))
    assert want != int(top[0])
    assert run(logits, penalty=3.0, pen_ids=ids) == want
    neg = -np.abs(logits) - 0.1  # negative logits are multiplied
    assert run(neg, penalty=1.5, pen_ids=[int(np.argmax(neg))]) == int(np.argmax(penalized(neg, 1.5, [int(np.argmax(neg))])))


@pytest.mark.parametrize("top_k,top_p", [(1, 1.0), (5, 1.0), (0, 0.5), (20, 0.9), (0, 1.0)])
def test_draws_stay_in_the_allowed_set(sampler, top_k, top_p):
    run = sampler(1000)
    rng = np.random.default_rng(7)
    logits = (rng.normal(size=1000) * 2).astype(np.float32)
    keep, _ = allowed(logits, 0.8, top_k, top_p)
    draws = {run(logits, temperature=0.8, top_k=top_k, top_p=top_p, seed=s) for s in range(40)}
    assert draws <= keep
    if len(keep) > 3:
        assert len(draws) > 1  # it does sample


def test_frequencies_follow_the_distribution(sampler):
    run = sampler(6)
    logits = np.array([2.0, 1.0, 0.5, 0.0, -1.0, 3.0], np.float32)
    _, p = allowed(logits, 1.3, 0, 0.97)
    n = 1500
    counts = np.bincount([run(logits, temperature=1.3, top_p=0.97, seed=11, step=i) for i in range(n)],
                         minlength=6)
    expected = p * n
    mask = expected > 0
    chi2 = float((((counts - expected) ** 2)[mask] / expected[mask]).sum())
    assert counts[~mask].sum() == 0
    assert chi2 < 20.5, (counts, expected)  # chi-square, 5 degrees of freedom, p = 0.001


@pytest.fixture(scope="module")
def masked_sampler(tmp_path_factory):
    """SampleToken with its optional fifth input, the allowed-token bitmask (constrained decoding)."""
    vocab = 1000
    words = (vocab + 31) // 32
    node = helper.make_node("SampleToken", ["logits", "sp", "seed", "pen", "mask"], ["tok"], domain="webinfer")
    graph = helper.make_graph([node], "sample_masked", [
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1, vocab]),
        helper.make_tensor_value_info("sp", TensorProto.FLOAT, [4]),
        helper.make_tensor_value_info("seed", TensorProto.UINT32, [2]),
        helper.make_tensor_value_info("pen", TensorProto.INT32, [P]),
        helper.make_tensor_value_info("mask", TensorProto.UINT32, [words]),
    ], [helper.make_tensor_value_info("tok", TensorProto.INT32, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("webinfer", 1)])
    out = tmp_path_factory.mktemp("sample_masked") / "m.wi"
    webinfer.build(model, str(out))
    sess = webinfer.InferenceSession(str(out))

    def run(logits, keep, temperature=0.0, top_k=0, top_p=1.0, penalty=1.0, pen_ids=(), seed=0):
        bits = np.zeros(words * 32, np.uint8)
        bits[sorted(keep)] = 1
        mask = np.packbits(bits.reshape(-1, 8)[:, ::-1]).view("<u4")  # bit i % 32 of word i // 32
        pen = np.full(P, -1, np.int32)
        pen[: len(pen_ids)] = pen_ids
        feeds = {"logits": np.asarray(logits, np.float32).reshape(1, 1, -1),
                 "sp": np.array([temperature, top_k, top_p, penalty], np.float32),
                 "seed": np.array([seed, 0], np.uint32), "pen": pen, "mask": mask.astype(np.uint32)}
        return int(sess.run(None, feeds)[0][0])

    return run


def _masked(logits, keep):
    x = np.full(len(logits), -np.inf, np.float32)
    idx = sorted(keep)
    x[idx] = np.asarray(logits, np.float32)[idx]
    return x


def test_mask_greedy_is_argmax_over_the_allowed_tokens(masked_sampler):
    rng = np.random.default_rng(3)
    for trial in range(4):
        logits = (rng.normal(size=1000) * 3).astype(np.float32)
        keep = set(rng.choice(1000, size=[1, 7, 100, 999][trial], replace=False).tolist())
        assert masked_sampler(logits, keep) == int(np.argmax(_masked(logits, keep)))
    # the penalty never revives a disallowed token
    logits = np.linspace(-1, 1, 1000).astype(np.float32)
    keep = {3, 500}
    assert masked_sampler(logits, keep, penalty=0.01, pen_ids=[999, 998]) == 500


@pytest.mark.parametrize("top_k,top_p", [(0, 1.0), (5, 1.0), (0, 0.6), (30, 0.9)])
def test_mask_draws_stay_in_the_allowed_tokens(masked_sampler, top_k, top_p):
    rng = np.random.default_rng(top_k + 10)
    logits = (rng.normal(size=1000) * 2).astype(np.float32)
    logits[:50] += 8  # the unmasked favourites are all disallowed
    keep = set(range(50, 1000, 7))
    kept, p = allowed(_masked(logits, keep), 0.9, top_k, top_p)
    want = {i for i in kept if p[i] > 0}  # a disallowed token has probability 0 (its logit is -inf)
    assert want and want <= keep
    draws = {masked_sampler(logits, keep, temperature=0.9, top_k=top_k, top_p=top_p, seed=s) for s in range(40)}
    assert draws <= want
    if len(want) > 3:
        assert len(draws) > 1
