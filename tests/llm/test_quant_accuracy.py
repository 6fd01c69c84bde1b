"""int8/int4 weight-only quantization of SmolLM2-135M-Instruct against the fp32 ONNX in onnxruntime.

One forward pass over a held text (tests/llm/data/held_text.txt, 612 tokens, past length 0): the top-1
next token of webinfer's int8 and int4 builds must agree with onnxruntime's fp32 logits at >= 97 % and
>= 90 % of positions, and int4's perplexity on the text must be within 10 % of fp32's. The builds keep
the plain graph (``generation=False``) so that every position's logits come back.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from webinfer import InferenceSession
from webinfer.build import build
from webinfer.llm.tokenizer import Tokenizer

pytestmark = pytest.mark.slow
HELD_TEXT = Path(__file__).parent / "data" / "held_text.txt"
N_LAYERS, KV_HEADS, HEAD_DIM = 30, 3, 64


def feeds_for(ids: list[int]) -> dict:
    s = len(ids)
    feeds = {"input_ids": np.array([ids], np.int64), "attention_mask": np.ones((1, s), np.int64),
             "position_ids": np.arange(s, dtype=np.int64)[None]}
    for i in range(N_LAYERS):
        for kind in ("key", "value"):
            feeds[f"past_key_values.{i}.{kind}"] = np.zeros((1, KV_HEADS, 0, HEAD_DIM), np.float32)
    return feeds


def next_token_stats(logits: np.ndarray, ids: list[int]) -> tuple[np.ndarray, float]:
    """(top-1 prediction per position, perplexity of the text's next tokens)."""
    logits = logits.reshape(len(ids), -1).astype(np.float64)
    shifted = logits[:-1] - logits[:-1].max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    nll = -logp[np.arange(len(ids) - 1), ids[1:]]
    return logits.argmax(axis=1), float(np.exp(nll.mean()))


def du_mib(path: Path) -> float:
    return int(subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True)
               .stdout.split()[0]) / 1024


@pytest.fixture(scope="module")
def held(smollm_dir):
    """Token ids of the held text and onnxruntime's fp32 predictions and perplexity on it."""
    import onnxruntime as ort

    ids = Tokenizer.from_file(smollm_dir / "tokenizer.json").encode(HELD_TEXT.read_text())
    assert 500 <= len(ids) <= 680, len(ids)  # 680 x 49152 f32 logits is the 128 MiB binding limit
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    sess = ort.InferenceSession(str(smollm_dir / "model.onnx"), opts, providers=["CPUExecutionProvider"])
    logits = sess.run(["logits"], feeds_for(ids))[0]
    top1, ppl = next_token_stats(logits, ids)
    return ids, top1, ppl


def test_quantized_smollm_agrees_with_fp32(smollm_dir, held, tmp_path):
    ids, ref_top1, ref_ppl = held
    model = str(smollm_dir / "model.onnx")
    sizes = {}
    build(model, str(tmp_path / "fp32.wi"), generation=False)
    sizes["fp32"] = du_mib(tmp_path / "fp32.wi")
    results = {}
    for fmt in ("int8", "int4"):
        out = tmp_path / f"{fmt}.wi"
        build(model, str(out), quantize=fmt, generation=False)
        sizes[fmt] = du_mib(out)
        logits = InferenceSession(str(out)).run(["logits"], feeds_for(ids))[0]
        top1, ppl = next_token_stats(logits, ids)
        results[fmt] = (float((top1 == ref_top1).mean()), ppl)
    print(f"\nheld text: {len(ids)} tokens; onnxruntime fp32 perplexity {ref_ppl:.3f}")
    for fmt in ("fp32", "int8", "int4"):
        agree, ppl = results.get(fmt, (None, None))
        line = f"{fmt}: artifact {sizes[fmt]:.1f} MiB"
        if agree is not None:
            line += f", top-1 agreement {100 * agree:.2f} %, perplexity {ppl:.3f} ({100 * (ppl / ref_ppl - 1):+.2f} %)"
        print(line)
    assert results["int8"][0] >= 0.97
    assert results["int4"][0] >= 0.90
    assert abs(results["int4"][1] / ref_ppl - 1) <= 0.10
    assert sizes["int4"] < sizes["int8"] < sizes["fp32"]
