"""A >= 1 B-parameter int4 decoder chatting in Chromium from a bundle, with the page's memory measured while it
loads (issue 37). The model: Llama-3.2-1B's dimensions (hidden 2048, 16 layers, 32 heads / 8 KV heads,
intermediate 8192, vocabulary 128,256, tied embeddings; 1.24 B parameters), random weights (the real ones
cannot be had offline), exported as the SmolLM2 recipe exports, with SmolLM2's tokenizer beside it.

Steps (each reuses what the previous wrote, under --work):
    model   the f32 ONNX (external data: 4.9 GB), cached under ~/.cache/webinfer/models
    build   `webinfer build --quantize int4` + the chat page bundled (webinfer.bundle, demo "chat")
    native  one greedy chat turn natively (wgpu-py), its prompt and generated ids to native.json
    page    the bundled page in headless Chromium (SwiftShader): the worker's JS heap (CDP Runtime.getHeapUsage,
            V8 heap + ArrayBuffer backing stores), the main thread's, and the Pyodide heap (the wasm memory's
            byteLength), sampled every 250 ms while it loads; the peaks printed; the same turn's ids compared
            with the native ones.

    python -m benchmarks.page_1b [--steps model,build,native,page] [--work build/page-1b] [--tokens 4]

Not a test (tens of minutes on 2 CPU cores); tests/browser/test_weights_stream.py covers the streaming loader.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = {"vocab_size": 128_256, "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
          "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 4096,
          "tie_word_embeddings": True, "initializer_range": 0.1, "rms_norm_eps": 1e-5, "rope_theta": 500_000.0}
PROMPT = "What is the capital of France?"
MAX_SEQ = 128


def log(msg: str) -> None:
    print(f"[page_1b {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def model_dir() -> Path:
    from demos.recipes import smollm2

    key = hashlib.sha256(repr(sorted(CONFIG.items())).encode()).hexdigest()[:10]
    return smollm2.cache_dir().parent / f"llama-1b-dims-random-{key}"


def export_model() -> Path:
    """The f32 ONNX with its weights as external data (a single file cannot pass protobuf's 2 GB)."""
    import shutil

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from demos.recipes import smollm2

    out = model_dir()
    if (out / "done").exists():
        log(f"model: reusing {out}")
        return out
    out.mkdir(parents=True, exist_ok=True)
    tok = smollm2.cache_dir()
    smollm2.export_tokenizer(tok)
    for name in smollm2.TOKENIZER_FILES:
        shutil.copyfile(tok / name, out / name)
    torch.manual_seed(0)
    cfg = LlamaConfig(**CONFIG)
    cfg._attn_implementation = "sdpa"
    t0 = time.perf_counter()
    model = LlamaForCausalLM(cfg).eval()
    log(f"model: {sum(p.numel() for p in model.parameters()) / 1e9:.3f} B parameters in {time.perf_counter() - t0:.0f} s")
    n = cfg.num_hidden_layers
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    args = (torch.randint(0, cfg.vocab_size, (2, 3)), torch.ones(2, 7, dtype=torch.int64),
            torch.arange(4, 7).expand(2, 3).contiguous(),
            *[torch.randn(2, cfg.num_key_value_heads, 4, head_dim) for _ in range(2 * n)])
    b, s, p = (torch.export.Dim(d) for d in ("batch", "sequence", "past_sequence"))
    shapes = ({0: b, 1: s}, {0: b, 1: torch.export.Dim.AUTO}, {0: b, 1: s}, tuple({0: b, 2: p} for _ in range(2 * n)))
    inputs, outputs = smollm2.io_names(n)
    with torch.no_grad():
        program = torch.onnx.export(smollm2._wrapper(model), args, dynamic_shapes=shapes, input_names=inputs,
                                    output_names=outputs, opset_version=smollm2.OPSET, dynamo=True,
                                    external_data=True, verbose=False)
    smollm2.name_mask_dim(program.model)
    program.save(str(out / "model.onnx"), external_data=True)
    (out / "done").write_text("ok\n")
    log(f"model: exported to {out} in {time.perf_counter() - t0:.0f} s")
    return out


def build_site(work: Path) -> Path:
    """The int4 artifact and its chat page (the browser wheel, Pyodide and the page's files beside it)."""
    import webinfer
    from webinfer.bundle import bundle
    from webinfer.web import browser_wheel

    art, site = work / "chat-1b.wi", work / "site"
    if not (art / "manifest.sha256").exists():
        t0 = time.perf_counter()
        webinfer.build(str(model_dir() / "model.onnx"), str(art), max_seq=MAX_SEQ, quantize="int4")
        log(f"build: {art} in {time.perf_counter() - t0:.0f} s")
    m = json.loads((art / "manifest.json").read_text())
    log(f"build: {len(m['shards'])} shards, {sum(s['bytes'] for s in m['shards']) / 1e6:.0f} MB of weights")
    if not (site / "chat" / "index.html").exists():
        bundle(str(art), str(site), demo="chat", wheel=browser_wheel(str(work / "wheel")))
        log(f"bundle: {site / 'chat'}")
    return site


def prompt_ids() -> list[int]:
    """The first turn's ids by transformers' own chat template (the page's must equal them)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir()))
    text = tok.apply_chat_template([{"role": "user", "content": PROMPT}], add_generation_prompt=True, tokenize=False)
    return list(tok.encode(text, add_special_tokens=False))


def native(work: Path, tokens: int) -> dict:
    from webinfer.llm.generate import Generator

    t0 = time.perf_counter()
    gen = Generator.load(str(work / "chat-1b.wi"))
    log(f"native: session opened in {time.perf_counter() - t0:.0f} s")
    ids = prompt_ids()
    t0 = time.perf_counter()
    got = [t.id for t in gen.generate(ids, max_new_tokens=tokens, stop_at_eos=False)]
    out = {"prompt_ids": ids, "token_ids": got, "seconds": round(time.perf_counter() - t0, 1)}
    (work / "native.json").write_text(json.dumps(out))
    log(f"native: {len(ids)} prompt ids -> {got} in {out['seconds']} s")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", default="model,build,native,page")
    p.add_argument("--work", default=str(ROOT / "build" / "page-1b"))
    p.add_argument("--tokens", type=int, default=4)
    args = p.parse_args(argv)
    steps = args.steps.split(",")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if "model" in steps:
        export_model()
    if "build" in steps:
        build_site(work)
    if "native" in steps:
        native(work, args.tokens)
    if "page" in steps:
        from benchmarks.page_memory import run_page

        got = run_page(work / "site", PROMPT, args.tokens, log)
        (work / "page.json").write_text(json.dumps(got))
        for _ in range(720):  # (the native step may still be running beside this one)
            if (work / "native.json").exists():
                break
            time.sleep(5)
        want = json.loads((work / "native.json").read_text())
        same_prompt = got["prompt_ids"] == want["prompt_ids"]
        n = len(got["token_ids"])
        same = got["token_ids"] == want["token_ids"][:n]
        log(f"page: prompt ids equal transformers' template: {same_prompt}; generated {got['token_ids']}, native "
            f"{want['token_ids']}: {'equal' if same else 'DIFFERENT'}")
        return 0 if same and same_prompt and got["under_300_mb"] else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
