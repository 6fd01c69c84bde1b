"""The CPU path's sampler (webinfer/site/cpu-chat.mjs ``sampleToken``, run by Node) against a numpy statement of
the WebGPU sampler's rules (shaders/sample.wgsl.j2): repetition penalty over the window, greedy argmax with
the lowest index on ties, temperature, top-k keeping ties, top-p, and the draw from the kept mass with the PCG
hash of seed and step. Also: draws over many seeds follow the kept softmax probabilities."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

CHAT_JS = Path(__file__).resolve().parents[1] / "webinfer" / "site" / "cpu-chat.mjs"
M32 = 0xFFFFFFFF
pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="needs Node (scripts/setup.sh installs it)")


def pcg(v: int) -> int:
    s = (v * 747796405 + 2891336453) & M32
    w = (((s >> ((s >> 28) + 4)) ^ s) * 277803737) & M32
    return ((w >> 22) ^ w) & M32


def reference(logits, o, history, pen_len, step) -> int:
    sc = logits.astype(np.float32).copy()
    if o["repetition_penalty"] != 1:
        for i in history[-pen_len:]:
            v = logits[i]
            sc[i] = v / np.float32(o["repetition_penalty"]) if v > 0 else v * np.float32(o["repetition_penalty"])
    best = int(np.argmax(sc))
    if o["temperature"] <= 0:
        return best
    x = (sc * np.float32(1 / o["temperature"])).astype(np.float32)
    keep = np.ones(len(x), bool)
    if 0 < o["top_k"] < len(x):
        keep = x >= np.sort(x)[::-1][o["top_k"] - 1]
    w = np.where(keep, np.exp(x.astype(np.float64) - x[best]), 0.0)
    if o["top_p"] < 1:
        for v in np.unique(x[keep])[::-1]:
            if w[x >= v].sum() >= o["top_p"] * w.sum():
                keep &= x >= v
                break
        w = np.where(keep, w, 0.0)
    r = pcg((o["seed"] & M32) ^ pcg((step + 0x9E3779B9) & M32))
    goal = (r >> 8) / 2**24 * w.sum()
    return int(min(np.searchsorted(np.cumsum(w), goal, side="right"), np.flatnonzero(keep)[-1]))


def run_node(cases: list[dict]) -> list[int]:
    script = (f"import {{ sampleToken }} from {json.dumps(CHAT_JS.as_uri())};\n"
              "let s = ''; process.stdin.on('data', (d) => { s += d; });\n"
              "process.stdin.on('end', () => { const out = JSON.parse(s).map((c) => sampleToken("
              "Float32Array.from(c.logits), c.o, c.history, c.pen_len, c.step));\n"
              "process.stdout.write(JSON.stringify(out)); });\n")
    done = subprocess.run(["node", "--input-type=module", "-e", script], input=json.dumps(cases), text=True,
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_sampler_follows_the_gpu_rules():
    rng = np.random.default_rng(4)
    cases, want = [], []
    for i in range(120):
        v = int(rng.integers(5, 300))
        logits = (rng.standard_normal(v) * rng.uniform(0.5, 4)).astype(np.float32)
        if i % 5 == 0:
            logits[rng.integers(0, v, 3)] = logits.max()  # ties at the top
        o = {"temperature": float([0, 0.3, 0.7, 1.0, 1.5][i % 5]), "top_k": int([0, 1, 5, 40][i % 4]),
             "top_p": float([1.0, 0.9, 0.5][i % 3]), "repetition_penalty": float([1.0, 1.3, 0.8][i % 3 - 1]),
             "seed": int(rng.integers(0, 2**32)), "max_new_tokens": 1, "stop_at_eos": True}
        history = rng.integers(0, v, int(rng.integers(1, 12))).tolist()
        case = {"logits": logits.tolist(), "o": o, "history": history, "pen_len": 6, "step": i}
        cases.append(case)
        want.append(reference(logits, o, history, 6, i))
    got = run_node(cases)
    assert sum(g == w for g, w in zip(got, want)) == len(want), [(i, g, w) for i, (g, w) in
                                                                  enumerate(zip(got, want)) if g != w]


def test_draws_follow_the_kept_probabilities():
    logits = np.array([2.0, 1.5, 1.0, 0.2, -1.0, -3.0], np.float32)
    o = {"temperature": 0.8, "top_k": 4, "top_p": 1.0, "repetition_penalty": 1.0, "max_new_tokens": 1,
         "stop_at_eos": True}
    cases = [{"logits": logits.tolist(), "o": dict(o, seed=s), "history": [], "pen_len": 4, "step": s % 7}
             for s in range(3000)]
    counts = np.bincount(run_node(cases), minlength=6) / 3000
    p = np.exp(logits[:4] / 0.8)
    p /= p.sum()
    assert counts[4:].sum() == 0  # outside the top 4
    np.testing.assert_allclose(counts[:4], p, atol=0.03)
