"""Build the onnxruntime-genai test fixture: a tiny random Llama through onnxruntime-genai's model builder
(int4, CPU), the format of the quantized LLMs that onnxruntime-genai and onnxruntime-web users run
(MatMulNBits, GatherBlockQuantized, GroupQueryAttention, SkipSimplifiedLayerNormalization, ...).

The builder ships inside the onnxruntime-genai wheel (`onnxruntime_genai/models/builder.py`) and needs only
torch, transformers, onnx-ir and onnxruntime, which the project's venv has. onnxruntime-genai is a dev dependency
(pyproject.toml), found by default; another version's builder can be fetched unpacked and given with --builder:
  .venv/bin/python -m pip download --no-deps onnxruntime-genai==0.18.0 -d /tmp/genai
  unzip -q -o /tmp/genai/onnxruntime_genai-0.18.0-*.whl -d /tmp/genai/whl
  .venv/bin/python scripts/export_genai_fixture.py --builder /tmp/genai/whl/onnxruntime_genai/models/builder.py

Output: tests/llm/data/genai/llama-int4/ with model.onnx (one file, ~105 KB: random seeded weights, so free of
any licence), the builder's genai_config.json and tokenizer files (a 256-word tokenizer made here) and
source.json (builder version, command, model config).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "llm" / "data" / "genai" / "llama-int4"
CONFIG = {"vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512,
          "tie_word_embeddings": True, "initializer_range": 0.3, "rms_norm_eps": 1e-5,
          "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}


def tiny_tokenizer(folder: Path, vocab: int) -> None:
    """A byte-level BPE tokenizer without merges: id = byte value (vocab 256), byte 2 as end of sequence. The
    builder copies tokenizer files beside the model; the tests feed ids."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from webinfer.llm.tokenizer import bytes_to_unicode

    chars = bytes_to_unicode()
    tok = Tokenizer(models.BPE({chars[i]: i for i in range(vocab)}, []))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=chars[2]).save_pretrained(folder)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--builder", help="path of onnxruntime_genai/models/builder.py (default: the installed one)")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    builder = args.builder
    if builder is None:
        spec = importlib.util.find_spec("onnxruntime_genai")
        if spec is None or not spec.submodule_search_locations:
            sys.exit("onnxruntime-genai is not installed: pass --builder (see this script's docstring)")
        builder = os.path.join(spec.submodule_search_locations[0], "models", "builder.py")
    import onnx
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        hf, built = Path(tmp) / "hf", Path(tmp) / "built"
        torch.manual_seed(0)
        LlamaForCausalLM(LlamaConfig(**CONFIG)).eval().save_pretrained(hf)
        tiny_tokenizer(hf, CONFIG["vocab_size"])
        cmd = [sys.executable, builder, "-i", str(hf), "-o", str(built), "-p", "int4", "-e", "cpu",
               "-c", str(Path(tmp) / "cache")]
        subprocess.run(cmd, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        model = onnx.load(str(built / "model.onnx"))  # external data read in
        onnx.save(model, str(out / "model.onnx"))
        for name in ("genai_config.json", "tokenizer.json", "tokenizer_config.json"):
            (out / name).write_text((built / name).read_text())
    version = Path(builder).resolve().parents[2].glob("onnxruntime_genai-*.dist-info")
    source = {"builder": next((p.name.removesuffix(".dist-info").split("-")[1] for p in version), "unknown"),
              "command": "builder.py -i <tiny llama> -o <out> -p int4 -e cpu", "config": CONFIG, "seed": 0}
    (out / "source.json").write_text(json.dumps(source, indent=2) + "\n")
    print(f"wrote {out} ({(out / 'model.onnx').stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
