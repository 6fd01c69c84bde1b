"""Decoders at the real dimensions of the models people run in a browser (issue 37), random weights (no
network to Hugging Face), exported as demos/recipes/smollm2.py exports SmolLM2, each built in f32, f16 and int4:
build seconds and peak RSS (``/usr/bin/time -v``), artifact bytes, the GPU memory ``webinfer inspect`` prints,
and 16 greedy ids against onnxruntime's — on the model itself (f32) and on the same weights rounded to f16 /
dequantized from int4 by tests/quantref.py (the independent unpacking), where those ids should then be equal.

Not in ``make test`` (minutes to an hour per model on lavapipe). Every phase runs in its own process, one at a
time, so onnxruntime's memory is freed before webinfer runs and each peak RSS is that phase's alone:

    nice python -m benchmarks.big_decoders --models smollm2-360m,qwen2.5-0.5b --formats f32,f16,int4

Rows are appended to ``--out`` (JSON lines) as they finish, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path.home() / ".cache" / "webinfer" / "models"
# The published configs (config.json of each model), weights random. initializer_range 2.4 / sqrt(hidden)
# (tests/tiny_llama.py's 0.3 at hidden 64) keeps greedy logits decisive, so rounding differences between two
# correct f32 runtimes do not flip a near tie.
MODELS = {
    "smollm2-360m": ("llama", {"vocab_size": 49152, "hidden_size": 960, "intermediate_size": 2560,
                               "num_hidden_layers": 32, "num_attention_heads": 15, "num_key_value_heads": 5,
                               "rope_theta": 100000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": True,
                               "max_position_embeddings": 8192}),
    "qwen2.5-0.5b": ("qwen2", {"vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864,
                               "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
                               "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
                               "max_position_embeddings": 32768}),
    "llama-3.2-1b": ("llama", {"vocab_size": 128256, "hidden_size": 2048, "intermediate_size": 8192,
                               "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
                               "head_dim": 64, "rope_theta": 500000.0, "rms_norm_eps": 1e-5,
                               "tie_word_embeddings": True, "max_position_embeddings": 131072,
                               "rope_scaling": {"factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                "original_max_position_embeddings": 8192, "rope_type": "llama3"}}),
    "smollm2-1.7b": ("llama", {"vocab_size": 49152, "hidden_size": 2048, "intermediate_size": 8192,
                               "num_hidden_layers": 24, "num_attention_heads": 32, "num_key_value_heads": 32,
                               "rope_theta": 130000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": True,
                               "max_position_embeddings": 8192}),
}
FORMATS = ("f32", "f16", "int4")
PROMPT_LEN, NEW, MAX_SEQ = 8, 16, 64


def _py(*args: str) -> list[str]:
    return [sys.executable, *args]


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def model_dir(name: str) -> Path:
    arch, cfg = MODELS[name]
    key = hashlib.sha256(repr((arch, sorted(cfg.items()))).encode()).hexdigest()[:10]
    return CACHE / f"big-{name}-{key}"


def export(name: str) -> None:
    """model.onnx (+ model.onnx.data: past 2 GB a protobuf cannot hold it) with random seeded weights."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    from demos.recipes import smollm2

    arch, cfg = MODELS[name]
    out = model_dir(name)  # (before the config: transformers rewrites a rope_scaling dict in place)
    config_cls, model_cls = (Qwen2Config, Qwen2ForCausalLM) if arch == "qwen2" else (LlamaConfig, LlamaForCausalLM)
    config = config_cls(**copy.deepcopy(cfg), initializer_range=2.4 / math.sqrt(cfg["hidden_size"]))
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = model_cls(config).eval()
    out.mkdir(parents=True, exist_ok=True)
    n_layers, n_kv = config.num_hidden_layers, config.num_key_value_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    args = (torch.randint(0, config.vocab_size, (2, 3)), torch.ones(2, 7, dtype=torch.int64),
            torch.arange(4, 7).expand(2, 3).contiguous(), *[torch.randn(2, n_kv, 4, head_dim) for _ in range(2 * n_layers)])
    b, s, p = (torch.export.Dim(n) for n in ("batch", "sequence", "past_sequence"))
    shapes = ({0: b, 1: s}, {0: b, 1: torch.export.Dim.AUTO}, {0: b, 1: s}, tuple({0: b, 2: p} for _ in range(2 * n_layers)))
    inputs, outputs = smollm2.io_names(n_layers)
    with torch.no_grad():
        program = torch.onnx.export(smollm2._wrapper(model), args, dynamic_shapes=shapes, input_names=inputs,
                                    output_names=outputs, opset_version=smollm2.OPSET, dynamo=True, verbose=False)
    smollm2.name_mask_dim(program.model)
    program.save(str(out / "model.onnx"), external_data=True)
    (out / "done").write_text(json.dumps({"params": sum(t.numel() for t in model.parameters())}))


def reference(name: str, fmt: str) -> None:
    """ref-<fmt>/model.onnx: the weights the <fmt> build stores, as f32 (tests/quantref.py: f16 rounded by numpy;
    int4: the MatMul weights int4 and the table int8, packed by graph/quantize.py and unpacked independently)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from quantref import stored_weights_reference

    src = model_dir(name)
    stored_weights_reference(str(src / "model.onnx"), src / f"ref-{fmt}", fmt)


def prompt(name: str) -> list[int]:
    import random

    rng = random.Random(37)
    return [rng.randrange(3, MODELS[name][1]["vocab_size"]) for _ in range(PROMPT_LEN)]


def ort_ids(name: str, path: str) -> None:
    from demos.recipes.smollm2 import ort_greedy

    t0 = time.perf_counter()
    ids, tok_s = ort_greedy(Path(path), prompt(name), NEW)
    print(json.dumps({"ids": ids, "decode_tok_s": tok_s, "seconds": time.perf_counter() - t0}))


def webinfer_ids(name: str, art: str) -> None:
    from webinfer.llm.generate import Generator

    t0 = time.perf_counter()
    gen = Generator.load(art)
    loaded = time.perf_counter() - t0
    ids = [t.id for t in gen.generate(prompt(name), max_new_tokens=NEW, stop_at_eos=False)]
    print(json.dumps({"ids": ids, "load_s": loaded, "seconds": time.perf_counter() - t0}))


def _timed(cmd: list[str]) -> tuple[subprocess.CompletedProcess, float, int]:
    """Run ``cmd`` under /usr/bin/time -v: (result, wall seconds, peak RSS bytes)."""
    t0 = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True, env=_env(), cwd=ROOT)
    wall = time.perf_counter() - t0
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    return r, wall, int(m.group(1)) * 1024 if m else -1


def _json_out(r: subprocess.CompletedProcess) -> dict:
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1][:300]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def run_model(name: str, formats: list[str], out: Path, keep: bool) -> None:
    src = model_dir(name)
    if not (src / "done").exists():
        r, wall, rss = _timed(_py("-m", "benchmarks.big_decoders", "_export", name))
        print(f"{name}: export {wall:.0f} s, peak RSS {rss / 2**30:.2f} GiB", flush=True)
        if r.returncode != 0:
            print(r.stderr[-2000:])
            return
    params = json.loads((src / "done").read_text())["params"]
    f32_bytes = sum(f.stat().st_size for f in src.glob("model.onnx*"))
    for fmt in formats:
        row = {"model": name, "format": fmt, "params": params, "onnx_f32_bytes": f32_bytes}
        art = src / f"build-{fmt}.wi"
        shutil.rmtree(art, ignore_errors=True)
        cmd = _py("-m", "webinfer.cli", "build", str(src / "model.onnx"), "-o", str(art), "--max-seq", str(MAX_SEQ))
        r, row["build_s"], row["build_peak_rss"] = _timed(cmd + ([] if fmt == "f32" else ["--quantize", fmt]))
        row["rss_vs_1.5x_f32"] = round(row["build_peak_rss"] / (1.5 * f32_bytes), 3)
        if r.returncode != 0:
            row["error"] = (r.stderr.strip().splitlines() or ["?"])[-1][:300]
        else:
            row["artifact_bytes"] = _du(art)
            r2 = subprocess.run(_py("-m", "webinfer.cli", "inspect", str(art)), capture_output=True, text=True,
                                env=_env(), cwd=ROOT)
            m = re.search(r"GPU memory at run\s+([\d,]+)", r2.stdout)
            row["gpu_memory"] = int(m.group(1).replace(",", "")) if m else None
            ref = src / "model.onnx" if fmt == "f32" else src / f"ref-{fmt}" / "model.onnx"
            if fmt != "f32" and not ref.exists():
                subprocess.run(_py("-m", "benchmarks.big_decoders", "_reference", name, fmt), env=_env(), cwd=ROOT,
                               check=True)
            r3, row["ort_s"], row["ort_peak_rss"] = _timed(_py("-m", "benchmarks.big_decoders", "_ort", name, str(ref)))
            ort = _json_out(r3)
            r4, row["webinfer_s"], row["run_peak_rss"] = _timed(_py("-m", "benchmarks.big_decoders", "_webinfer",
                                                                    name, str(art)))
            wi = _json_out(r4)
            row.update(ort_ids=ort.get("ids"), webinfer_ids=wi.get("ids"), ids_equal=ort.get("ids") == wi.get("ids"),
                       reference="model" if fmt == "f32" else f"same weights ({fmt})",
                       errors=[e["error"] for e in (ort, wi) if "error" in e] or None)
            if not keep:
                shutil.rmtree(art, ignore_errors=True)
        print(json.dumps(row), flush=True)
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0].startswith("_"):  # a phase, in its own process
        {"_export": export, "_reference": reference, "_ort": ort_ids, "_webinfer": webinfer_ids}[argv[0]](*argv[1:])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma list of {', '.join(MODELS)}")
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--out", default=str(ROOT / "bench-results" / "big_decoders.jsonl"))
    ap.add_argument("--keep", action="store_true", help="keep the artifacts (default: removed after each row)")
    a = ap.parse_args(argv)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    for name in a.models.split(","):
        run_model(name, a.formats.split(","), Path(a.out), a.keep)


if __name__ == "__main__":
    main()
