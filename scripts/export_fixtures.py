"""Export tiny random-weight decoders as the ONNX files people already have: the test matrix's fixtures.

Each architecture (a transformers config of hidden 64, 2 layers, vocab 256) is exported by one of:
  dynamo      torch.onnx.export(dynamo=True, opset 20, sdpa attention), as demos/recipes/smollm2.py does
  eager       the same with transformers' eager attention (softmax(q·kᵀ * scale) spelled out)
  opset23     torch.onnx.export at opset 23 (torch may write ONNX Attention / RMSNormalization)
  optimum     Hugging Face optimum (`--task text-generation-with-past`), the format of most Hub ONNX LLMs

optimum-onnx needs transformers < 4.58, so it runs in its own virtualenv (never the project's):
  python3 -m venv /work/coord/venv-optimum
  /work/coord/venv-optimum/bin/pip install torch==2.13.0 optimum-onnx "transformers<4.58" onnx onnxruntime
  /work/coord/venv-optimum/bin/python scripts/export_fixtures.py --exporter optimum
The torch exports use the project's venv (transformers 5):
  .venv/bin/python scripts/export_fixtures.py --exporter dynamo eager opset23

Output: tests/llm/data/decoders/<arch>-<exporter>.onnx (single file, fp32, a few hundred KB each). Weights
are random (seeded), so the files are small and free of any licence; the tests compare webinfer's greedy ids
with onnxruntime's on the same file, so the weights need no meaning.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "llm" / "data" / "decoders"
VOCAB = 256
COMMON = {"vocab_size": VOCAB, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512,
          "initializer_range": 0.3, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
EAGER_ONLY = {"gemma2"}  # Gemma 2's attention soft-cap: transformers 5 refuses sdpa, 4.57's sdpa drops the cap
# name -> (transformers config class, overrides)
ARCHS = {
    "llama": ("LlamaConfig", {"tie_word_embeddings": True}),
    "qwen2": ("Qwen2Config", {"use_sliding_window": False}),
    "qwen3": ("Qwen3Config", {"head_dim": 16, "use_sliding_window": False}),
    "phi3": ("Phi3Config", {"original_max_position_embeddings": 512}),
    "mistral": ("MistralConfig", {"sliding_window": None}),
    "gemma": ("GemmaConfig", {"head_dim": 16}),
    "gemma2": ("Gemma2Config", {"head_dim": 16, "sliding_window": 512, "query_pre_attn_scalar": 16,
                                "attn_logit_softcapping": 2.0, "final_logit_softcapping": 3.0}),  # caps that bite
    "gemma3": ("Gemma3TextConfig", {"head_dim": 16, "sliding_window": 512, "query_pre_attn_scalar": 16}),
    "olmo": ("OlmoConfig", {}),
    "gpt2": ("GPT2Config", {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 256, "vocab_size": VOCAB,
                            "initializer_range": 0.3, "bos_token_id": 1, "eos_token_id": 2}),
}


def make_model(arch: str, attn: str = "sdpa", vocab: int = VOCAB):
    """``vocab``: the embedding/lm-head size (a family tokenizer's size, tests/llm/test_decoder_family_tokenizers.py)."""
    import torch
    import transformers

    cls_name, overrides = ARCHS[arch]
    cfg_cls = getattr(transformers, cls_name)
    kwargs = {**(overrides if arch == "gpt2" else {**COMMON, **overrides}), "vocab_size": vocab}
    config = cfg_cls(**kwargs)
    config._attn_implementation = attn
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=attn).eval()
    with torch.no_grad():  # random norms/biases too, so that no parameter is a trivial 0 or 1
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(torch.randn_like(p) * 0.2 + (1.0 if "norm" in name or "ln" in name else 0.0))
    return model


def export_torch(arch: str, exporter: str, dest: Path, vocab: int = VOCAB) -> None:
    sys.path.insert(0, str(ROOT))
    from demos.recipes import smollm2

    model = make_model(arch, "eager" if exporter == "eager" or arch in EAGER_ONLY else "sdpa", vocab)
    opset = 23 if exporter == "opset23" else smollm2.OPSET
    with tempfile.TemporaryDirectory() as tmp:
        old = smollm2.OPSET
        smollm2.OPSET = opset
        try:
            smollm2.export_model(Path(tmp), model=model)
        finally:
            smollm2.OPSET = old
        shutil.move(Path(tmp) / "model.onnx", dest)  # the destination may be on another file system


def export_optimum(arch: str, dest: Path) -> None:
    from optimum.exporters.onnx import main_export

    model = make_model(arch, "eager" if arch in EAGER_ONLY or arch == "gpt2" else "sdpa")
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(Path(tmp) / "hf")
        main_export(str(Path(tmp) / "hf"), output=Path(tmp) / "onnx", task="text-generation-with-past",
                    no_post_process=False, do_validation=False)
        os.replace(Path(tmp) / "onnx" / "model.onnx", dest)
        extra = [p.name for p in (Path(tmp) / "onnx").iterdir() if p.name.startswith("model.onnx_data")]
        if extra:
            raise RuntimeError(f"{arch}: optimum wrote external data {extra}; the fixture must be one file")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exporter", nargs="+", choices=["dynamo", "eager", "opset23", "optimum"], required=True)
    parser.add_argument("--arch", nargs="+", choices=sorted(ARCHS), default=sorted(ARCHS))
    ns = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    OUT.mkdir(parents=True, exist_ok=True)
    failed = []
    for exporter in ns.exporter:
        for arch in ns.arch:
            dest = OUT / f"{arch}-{exporter}.onnx"
            try:
                export_optimum(arch, dest) if exporter == "optimum" else export_torch(arch, exporter, dest)
                print(f"{dest.name}: {dest.stat().st_size / 1024:.0f} KiB", flush=True)
            except Exception as e:  # keep going: report every architecture an exporter cannot do
                failed.append(f"{arch}-{exporter}")
                print(f"{arch}-{exporter}: export failed: {type(e).__name__}: {str(e)[:300]}", flush=True)
    if failed:
        print(f"failed: {failed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
