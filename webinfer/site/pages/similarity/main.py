"""Sentence similarity (all-MiniLM-L6-v2) in the browser, as sentence-transformers computes it: WordPiece
ids, the model's last hidden state, mean pooling over the attention mask, L2 normalisation, cosine."""

import json
import math
import time
from array import array

from webinfer.llm.wordpiece import WordPieceTokenizer
from webinfer.runtime.browser import fetch_bytes
from webinfer.runtime.tensor import HostTensor
from webinfer.runtime.webpage import PageSession

session = None
tokenizer = None


async def setup(artifact_url, adapter, device, weight_pairs):
    global session, tokenizer
    session = await PageSession.open(artifact_url, adapter, device, weight_pairs)
    tokenizer = WordPieceTokenizer.from_json((await fetch_bytes(artifact_url + "../tokenizer.json")).decode())
    await embed(["warm up the kernels", "once"])


def _int64(rows: list[list[int]]) -> HostTensor:
    return HostTensor("int64", [len(rows), len(rows[0])], array("q", [v for r in rows for v in r]).tobytes())


async def embed(texts: list[str]) -> tuple[list[list[float]], list[list[int]]]:
    """Unit-length sentence embeddings of ``texts`` (one batch, padded to the longest)."""
    ids = [tokenizer.encode(t).ids for t in texts]
    n = max(len(i) for i in ids)
    mask = [[1] * len(i) + [0] * (n - len(i)) for i in ids]
    padded = [i + [0] * (n - len(i)) for i in ids]
    out = await session.run({"input_ids": _int64(padded), "attention_mask": _int64(mask),
                             "token_type_ids": _int64([[0] * n for _ in ids])})
    hidden = array("f", out["last_hidden_state"].data)
    width = len(hidden) // (len(texts) * n)
    vectors = []
    for b, m in enumerate(mask):
        acc = [0.0] * width
        for t in range(n):
            if m[t]:
                row = (b * n + t) * width
                for k in range(width):
                    acc[k] += hidden[row + k]
        count = max(sum(m), 1e-9)
        acc = [v / count for v in acc]
        norm = max(math.sqrt(sum(v * v for v in acc)), 1e-12)
        vectors.append([v / norm for v in acc])
    return vectors, ids


async def compare(a: str, b: str) -> str:
    if not a.strip() or not b.strip():
        raise ValueError("both texts must be non-empty")
    t0 = time.perf_counter()
    (va, vb), ids = await embed([a, b])
    score = sum(x * y for x, y in zip(va, vb))
    return json.dumps({"scores": [score], "token_ids": ids, "run_ms": round((time.perf_counter() - t0) * 1000, 1)})
