"""webinfer.VerifyDraft (speculative decoding's verdict on a draft) against a numpy implementation of the rule:
greedy acceptance by argmax, and speculative sampling for a deterministic proposal (accept d with probability
p(d), else draw from p without d), with the kernel's counter-based random numbers reproduced in numpy so each
seed's outcome is checked exactly; and the emitted tokens' frequencies against the target distribution."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import webinfer

M32 = 0xFFFFFFFF


@pytest.fixture(scope="module")
def verifier(tmp_path_factory):
    cache = {}

    def get(vocab: int):
        if vocab not in cache:
            node = helper.make_node("VerifyDraft", ["logits", "ids", "sp", "seed"], ["out"], domain="webinfer")
            graph = helper.make_graph([node], "verify", [
                helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "rows", vocab]),
                helper.make_tensor_value_info("ids", TensorProto.INT32, ["rows"]),
                helper.make_tensor_value_info("sp", TensorProto.FLOAT, [4]),
                helper.make_tensor_value_info("seed", TensorProto.UINT32, [2]),
            ], [helper.make_tensor_value_info("out", TensorProto.INT32, [2])])
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20),
                                                            helper.make_opsetid("webinfer", 1)])
            out = tmp_path_factory.mktemp("verify") / f"v{vocab}.wi"
            webinfer.build(model, str(out))
            cache[vocab] = webinfer.InferenceSession(str(out))
        sess = cache[vocab]

        def run(logits, draft, temperature=0.0, top_k=0, top_p=1.0, seed=0, step=0):
            logits = np.asarray(logits, np.float32)
            feeds = {"logits": logits[None], "ids": np.array(list(draft) + [-1], np.int32),
                     "sp": np.array([temperature, top_k, top_p, 1.0], np.float32),
                     "seed": np.array([seed, step], np.uint32)}
            n, tok = sess.run(None, feeds)[0]
            return int(n), int(tok)

        return run

    return get


def pcg(v: int) -> int:
    s = (v * 747796405 + 2891336453) & M32
    w = (((s >> ((s >> 28) + 4)) ^ s) * 277803737) & M32
    return ((w >> 22) ^ w) & M32


def draw(seed: int, step: int, k: int) -> float:
    return (pcg(seed ^ pcg(pcg((step + 0x9E3779B9) & M32) ^ k)) >> 8) / 16777216.0


def probs(row, temperature: float, top_k: int) -> np.ndarray:
    x = np.asarray(row, np.float64) / temperature
    keep = np.ones_like(x, bool) if not 0 < top_k < len(x) else x >= np.sort(x)[-top_k]
    p = np.where(keep, np.exp(x - x.max()), 0.0)
    return p / p.sum()


def reference(logits, draft, temperature, top_k, seed, step, margin=1e-4):
    """(accepted count, token) by the rule, or None when a random number falls within ``margin`` of a
    decision boundary (f32 rounding on the GPU may then decide otherwise)."""
    for r, row in enumerate(logits):
        d = draft[r] if r < len(draft) else None
        p = probs(row, temperature, top_k)
        if d is not None:
            u = draw(seed, step, 2 * r)
            pd = p[d] if 0 <= d < len(p) else 0.0
            if abs(u - pd) < margin:
                return None
            if u < pd:
                continue
        rest = p.copy()
        if d is not None and 0 <= d < len(p):
            rest[d] = 0.0
        cum = np.cumsum(rest / rest.sum())
        u = draw(seed, step, 2 * r + 1)
        if np.min(np.abs(cum - u)) < margin:
            return None
        return r, int(np.searchsorted(cum, u, side="right"))
    raise AssertionError("unreachable: the last row always decides")


@pytest.mark.parametrize("vocab", [9, 1000])
def test_greedy_accepts_while_draft_is_argmax(verifier, vocab):
    run = verifier(vocab)
    rng = np.random.default_rng(vocab)
    logits = rng.normal(size=(5, vocab)).astype(np.float32)
    best = logits.argmax(1)
    for agree in range(5):  # the first `agree` draft tokens equal the argmax, then one differs
        draft = [int(b) for b in best[:4]]
        if agree < 4:
            draft[agree] = int((best[agree] + 1) % vocab)
        assert run(logits, draft) == (agree, int(best[agree]))
    assert run(logits, [int(best[0]), -1, 3, 3]) == (1, int(best[1]))  # an invalid id is a mismatch
    assert run(logits, [int(best[0]), vocab + 4, 3, 3]) == (1, int(best[1]))
    tied = np.zeros((2, vocab), np.float32)
    tied[0, [3, 5]] = 1.0  # ties: the lowest index, like numpy's argmax (and SampleToken)
    assert run(tied, [5]) == (0, 3)
    assert run(tied, [3]) == (1, 0)


@pytest.mark.parametrize("temperature,top_k", [(1.0, 0), (0.7, 3)])
def test_sampling_rule_matches_numpy_seed_by_seed(verifier, temperature, top_k):
    run = verifier(9)
    rng = np.random.default_rng(7)
    logits = (rng.normal(size=(4, 9)) * 1.5).astype(np.float32)
    # drafts the target likes, dislikes, and one outside its top-k
    draft = [int(np.argsort(logits[0])[-2]), int(logits[1].argmax()), int(logits[2].argmin())]
    checked = 0
    for seed in range(300):
        want = reference(logits, draft, temperature, top_k, seed, 11)
        if want is None:
            continue
        assert run(logits, draft, temperature, top_k, seed=seed, step=11) == want, f"seed {seed}"
        checked += 1
    assert checked >= 290


def test_emitted_tokens_follow_the_target_distribution(verifier):
    """The first emitted token (the draft's if accepted, else the target's) is distributed as the target's
    p at row 0, whatever the draft. With N = 3000 draws the frequency of a token of probability p has
    standard deviation sqrt(p (1 - p) / N) <= 0.0092; the tolerance is 5 of them (a false alarm below 1e-5
    per token), while accepting every draft (or never) would be off by p(d) or 1 - p(d) >= 0.19 here."""
    run = verifier(5)
    logits = np.array([[1.0, 0.2, -0.5, 0.6, 0.0], [0.0, 1.0, 0.5, 0.0, -1.0]], np.float32)
    p = probs(logits[0], 1.0, 0)
    n_draws = 3000
    for d in (0, 2):
        counts = np.zeros(5)
        for seed in range(n_draws):
            n, tok = run(logits, [d], 1.0, seed=seed, step=1)
            counts[d if n >= 1 else tok] += 1
        sd = np.sqrt(p * (1 - p) / n_draws)
        assert np.all(np.abs(counts / n_draws - p) <= 5 * sd), (d, counts / n_draws, p)
