"""Text-generation benchmark: webinfer (fp32, int8, int4) beside onnxruntime's CPU provider, one run.

For each engine: prefill tokens/s on a prompt of ``--prefill`` tokens (median of ``--repeat`` runs), and
greedy decode tokens/s over ``--decode`` tokens (median single-step time). Every webinfer variant's greedy
tokens are compared with onnxruntime's; a mismatch is printed (quantized variants may differ). Also prints
the GPU memory each webinfer session holds (weights, KV cache, plan buffers) and, with ``--profile``, where a
decode step's time goes, kernel by kernel, from GPU timestamps.

    python benchmarks/generate_bench.py [--variants fp32,int8,int4] [--prefill 128] [--decode 64] [--profile]

Not a test: timings on a software GPU are noisy, so compare the ratios printed side by side.
"""

from __future__ import annotations

import argparse
import collections
import inspect
import json
import os
import statistics
import struct
import sys
import time
from array import array
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TEXT = ("The history of astronomy is a story of patient observation. Long before telescopes, people tracked the "
        "motions of the sun, the moon and the wandering planets, and built calendars, temples and instruments "
        "to follow them. ")


def prompt_ids(model_dir: Path, n: int) -> list[int]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    ids: list[int] = []
    while len(ids) < n:
        ids += tok.encode(TEXT, add_special_tokens=False).ids
    return ids[:n]


def ort_bench(onnx_path: Path, ids: list[int], n_decode: int, repeat: int) -> dict:
    import numpy as np
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = os.cpu_count() or 2
    sess = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
    past_inputs = [i for i in sess.get_inputs() if i.name.startswith("past_key_values.")]
    n_kv, head = past_inputs[0].shape[1], past_inputs[0].shape[3]
    names = [o.name for o in sess.get_outputs()]

    def step(step_ids, past, pos):
        feeds = {"input_ids": np.array([step_ids], np.int64),
                 "attention_mask": np.ones((1, pos + len(step_ids)), np.int64),
                 "position_ids": np.arange(pos, pos + len(step_ids), dtype=np.int64)[None], **past}
        out = dict(zip(names, sess.run(None, feeds)))
        nxt = {k.replace("present.", "past_key_values."): v for k, v in out.items() if k != "logits"}
        return int(out["logits"][0, -1].argmax()), nxt

    empty = {i.name: np.zeros((1, n_kv, 0, head), np.float32) for i in past_inputs}
    prefill = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        token, past = step(ids, empty, 0)
        prefill.append(time.perf_counter() - t0)
    tokens, times, pos = [token], [], len(ids)
    for _ in range(n_decode - 1):
        t0 = time.perf_counter()
        token, past = step([tokens[-1]], past, pos)
        times.append(time.perf_counter() - t0)
        tokens.append(token)
        pos += 1
    return {"prefill_tok_s": len(ids) / statistics.median(prefill), "decode_tok_s": 1 / statistics.median(times),
            "tokens": tokens}


def build_variant(onnx_path: Path, variant: str, max_seq: int, out_root: Path) -> Path | str:
    import webinfer.build as B

    out = out_root / f"smollm2-{variant}-{max_seq}.wi"
    kwargs = {"max_seq": max_seq}
    if variant != "fp32":
        if "quantize" not in inspect.signature(B.build).parameters:
            return f"not available: this webinfer has no --quantize {variant}"
        kwargs["quantize"] = variant
    stamp = out / "bench-source.json"
    key = {"onnx_mtime": onnx_path.stat().st_mtime, "kwargs": kwargs, "webinfer": _code_stamp()}
    if stamp.is_file() and json.loads(stamp.read_text()) == key:
        return out
    t0 = time.perf_counter()
    B.build(str(onnx_path), str(out), **kwargs)
    stamp.write_text(json.dumps(key))
    print(f"  built {out.name} in {time.perf_counter() - t0:.1f} s", flush=True)
    return out


def _code_stamp() -> float:
    pkg = ROOT / "webinfer"
    return max(p.stat().st_mtime for p in pkg.rglob("*") if p.suffix in (".py", ".j2"))


def webinfer_bench(art: Path, ids: list[int], n_decode: int, repeat: int) -> tuple[dict, object]:
    from webinfer.llm.generate import Generator

    gen = Generator.load(str(art))
    list(gen.generate(ids[:8], max_new_tokens=3, stop_at_eos=False))  # compile pipelines, build plans
    prefill, decode, tokens = [], [], []
    for _ in range(repeat):
        gen.reset()  # each run prefills the whole prompt (else the cached prefix is reused: one token prefilled)
        tokens = [t.id for t in gen.generate(ids, max_new_tokens=n_decode, stop_at_eos=False)]
        assert gen.stats["reused_tokens"] == 0, gen.stats["reused_tokens"]
        prefill.append(gen.stats["prefill_tok_s"])
        decode.append(gen.stats["decode_tok_s"])
    size = sum(f.stat().st_size for f in art.rglob("*") if f.is_file())
    return {"prefill_tok_s": statistics.median(prefill), "decode_tok_s": statistics.median(decode),
            "tokens": tokens, "artifact_bytes": size, "gpu": gen.core.gpu_bytes()}, gen


def profile_decode(gen, pos: int) -> list[tuple[str, int, float]]:
    """Kernel time of one decode step at ``pos`` past tokens, summed per kernel family."""
    from webinfer.runtime.tensor import HostTensor

    n_pen = gen._penalty_len
    feeds = {"input_ids": HostTensor("int64", (1, 1), array("q", [42]).tobytes()),
             "attention_mask": HostTensor("int64", (1, pos + 1), array("q", [1] * (pos + 1)).tobytes()),
             "position_ids": HostTensor("int64", (1, 1), array("q", [pos]).tobytes()),
             "sampling_params": HostTensor("float32", (4,), struct.pack("<4f", 0, 0, 1, 1)),
             "sampling_seed": HostTensor("uint32", (2,), struct.pack("<2I", 0, 0)),
             "penalty_ids": HostTensor("int32", (n_pen,), array("i", [-1] * n_pen).tobytes()),
             "verify_ids": HostTensor("int32", (1,), array("i", [-1]).tobytes())}
    feeds = {k: v for k, v in feeds.items() if k in gen._inputs}  # (artifacts built before the verify head)
    if gen._mask_words:  # artifacts built with the constrained-decoding mask: every token allowed
        feeds["token_mask"] = HostTensor("uint32", (gen._mask_words,), gen._all_tokens)
    dims = {gen.past_dim: pos}
    feeds.update(gen.logit_options.feeds())  # (no bias, no logprobs)
    gen.core.profile(feeds, dims)
    rows = gen.core.profile(feeds, dims)
    by = collections.defaultdict(lambda: [0, 0])
    for step, ns in rows:
        by[step.label][0] += ns
        by[step.label][1] += 1
    return sorted(((k, c, ns / 1e6) for k, (ns, c) in by.items()), key=lambda r: -r[2])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, default=None, help="folder with model.onnx + tokenizer.json "
                   "(default: the SmolLM2 cache, exported when missing)")
    p.add_argument("--variants", default="fp32,int8,int4")
    p.add_argument("--prefill", type=int, default=128)
    p.add_argument("--decode", type=int, default=64)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--max-seq", type=int, default=1024)
    p.add_argument("--out", type=Path, default=ROOT / "build" / "bench-artifacts")
    p.add_argument("--profile", action="store_true", help="kernel-by-kernel time of a decode step")
    p.add_argument("--json", type=Path, help="also write the results here")
    a = p.parse_args(argv)
    if a.model is None:
        from demos.recipes import smollm2

        a.model = smollm2.cache_dir()
        smollm2.export_tokenizer(a.model)
        smollm2.export_model(a.model)
    onnx_path = a.model / "model.onnx"
    a.out.mkdir(parents=True, exist_ok=True)
    ids = prompt_ids(a.model, a.prefill)
    print(f"prompt {len(ids)} tokens, decode {a.decode} tokens, {a.repeat} runs each", flush=True)
    results = {"onnxruntime-cpu fp32": ort_bench(onnx_path, ids, a.decode, a.repeat)}
    print("  onnxruntime done", flush=True)
    profiles = {}
    for variant in a.variants.split(","):
        art = build_variant(onnx_path, variant, a.max_seq, a.out)
        if isinstance(art, str):
            results[f"webinfer {variant}"] = {"error": art}
            continue
        res, gen = webinfer_bench(art, ids, a.decode, a.repeat)
        results[f"webinfer {variant}"] = res
        if a.profile:
            profiles[variant] = profile_decode(gen, a.prefill)
        print(f"  webinfer {variant} done", flush=True)
    ref = results["onnxruntime-cpu fp32"]
    print(f"\n{'engine':24s} {'prefill tok/s':>14s} {'decode tok/s':>13s} {'decode vs ORT':>14s} "
          f"{'prefill vs ORT':>15s} {'same tokens':>12s} {'artifact MiB':>13s} {'GPU MiB (w+kv+act)':>20s}")
    for name, r in results.items():
        if "error" in r:
            print(f"{name:24s} {r['error']}")
            continue
        same = sum(x == y for x, y in zip(r["tokens"], ref["tokens"]))
        gpu = r.get("gpu")
        gpu_text = (f"{gpu['total'] / 2**20:.1f} ({gpu['weights'] / 2**20:.0f}+{gpu['states'] / 2**20:.0f}+"
                    f"{gpu['plans'] / 2**20:.1f})") if gpu else "-"
        art = f"{r['artifact_bytes'] / 2**20:.1f}" if "artifact_bytes" in r else "-"
        print(f"{name:24s} {r['prefill_tok_s']:14.1f} {r['decode_tok_s']:13.2f} "
              f"{r['decode_tok_s'] / ref['decode_tok_s']:13.2f}x {r['prefill_tok_s'] / ref['prefill_tok_s']:14.2f}x "
              f"{same:>5d}/{len(ref['tokens']):<6d} {art:>13s} "
              f"{gpu_text:>20s}")
    for variant, rows in profiles.items():
        total = sum(r[2] for r in rows)
        print(f"\ndecode step at position {a.prefill}, webinfer {variant}: {total:.1f} ms of GPU time "
              f"in {sum(r[1] for r in rows)} dispatches")
        for label, count, ms in rows[:12]:
            print(f"  {label:40s} {count:5d} {ms:9.2f} ms {100 * ms / total:5.1f}%")
    if a.json:
        a.json.write_text(json.dumps({"results": results, "profiles": profiles}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
