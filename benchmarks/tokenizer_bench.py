"""Tokenizer benchmark: webinfer.llm.tokenizers (standard-library Python, what the page runs) beside the
`tokenizers` package, natively, on the family tokenizer.json files the tests build (tests/llm/
tokenizer_families.py) and SmolLM2's: load time, then a varied ~4,000-token prompt encoded with empty caches
(cold: every word new, as a first prompt) and again (warm), each checked equal to `tokenizers`' ids.

    python benchmarks/tokenizer_bench.py [--tokens 4000]

Not a test: timings on shared CPUs are noisy. The Pyodide figures come from tests/browser/test_tokenizer_browser.py.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "llm")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=4000)
    args = ap.parse_args()
    import tokenizer_families as families
    from tokenizer_corpus import build_corpus
    from tokenizers import Tokenizer

    from webinfer.llm.tokenizers import check

    held = (ROOT / "tests" / "llm" / "data" / "held_text.txt").read_text(encoding="utf-8")
    source = held + " ".join(build_corpus(n_random=1500, seed=555)[120:])
    files = {name: build() for name, build in families.BUILT.items()}
    files["smollm2"] = families.smollm2_file().read_text(encoding="utf-8")
    for name, text in files.items():
        ref = Tokenizer.from_str(text)
        ref.no_truncation()
        prompt = ref.decode(ref.encode(source, add_special_tokens=False).ids[:args.tokens])
        t0 = time.perf_counter()
        ours = check(text)
        t1 = time.perf_counter()
        cold = ours.encode(prompt, False)
        t2 = time.perf_counter()
        warm = ours.encode(prompt, False)
        t3 = time.perf_counter()
        want = ref.encode(prompt, add_special_tokens=False).ids
        t4 = time.perf_counter()
        print(f"{name:8s} load {t1 - t0:5.2f} s  {len(want)} tokens: cold {1e3 * (t2 - t1):5.0f} ms, warm "
              f"{1e3 * (t3 - t2):4.0f} ms (tokenizers {1e3 * (t4 - t3):4.0f} ms)  equal={cold == want == warm}")


if __name__ == "__main__":
    main()
