"""Encoder-decoder export folders with random weights, laid out as optimum writes them, made offline and cached
under ~/.cache/webinfer/models by their config (tests/llm and tests/browser share them).

- ``whisper_tiny()``: WhisperConfig at whisper-tiny's dimensions (4 + 4 layers, 384 wide, 6 heads, vocab 51865,
  80 mel bins, 1500 source positions).
- ``whisper_tiny_en(archive)`` (tests/whisper_ct2.py): real weights, converted from a package's CTranslate2 files.
- ``marian_tiny()``: a tiny MarianMT (2 + 2 layers, 64 wide), with a Unigram tokenizer.json trained by the
  ``tokenizers`` library on tests/llm/data/held_text.txt.

Each folder holds ``encoder_model.onnx``, ``decoder_model.onnx`` (no past: the first step, which also returns the
cross-attention keys/values as ``present.N.encoder.*``), ``decoder_with_past_model.onnx`` (one token, self-attention
past and cross-attention keys/values as inputs), config.json, generation_config.json, tokenizer.json (and, for
Whisper, preprocessor_config.json): optimum's file layout and input/output names. optimum-onnx itself is not used:
it needs transformers < 4.58, the project runs 5.x (scripts/export_fixtures.py keeps it in a venv of its own), so
the graphs come from torch.onnx.export (TorchScript, opset 17, as optimum exports) over wrappers with optimum's
signatures.  ``python tests/seq2seq_fixtures.py`` makes both and prints their folders.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

OPSET = 17
VERSION = 1  # bump when the export changes, so cached folders are made again
FILES = ("encoder_model.onnx", "decoder_model.onnx", "decoder_with_past_model.onnx", "config.json",
         "generation_config.json", "tokenizer.json")
WHISPER_TINY = {"vocab_size": 51865, "num_mel_bins": 80, "encoder_layers": 4, "encoder_attention_heads": 6,
                "decoder_layers": 4, "decoder_attention_heads": 6, "d_model": 384, "encoder_ffn_dim": 1536,
                "decoder_ffn_dim": 1536, "max_source_positions": 1500, "max_target_positions": 448,
                "decoder_start_token_id": 50258, "eos_token_id": 50257, "pad_token_id": 50257,
                "bos_token_id": 50257}
# Whisper's special tokens at their real ids (multilingual vocabulary)
WHISPER_SPECIAL = {"<|endoftext|>": 50257, "<|startoftranscript|>": 50258, "<|en|>": 50259, "<|de|>": 50261,
                   "<|translate|>": 50358, "<|transcribe|>": 50359, "<|notimestamps|>": 50363}
MARIAN_TINY = {"vocab_size": 320, "d_model": 64, "encoder_layers": 2, "decoder_layers": 2,
               "encoder_attention_heads": 4, "decoder_attention_heads": 4, "encoder_ffn_dim": 128,
               "decoder_ffn_dim": 128, "max_position_embeddings": 256, "pad_token_id": 2, "eos_token_id": 1,
               "decoder_start_token_id": 2, "scale_embedding": True, "share_encoder_decoder_embeddings": True,
               "tie_word_embeddings": False}


def cache_root() -> Path:
    return Path(os.environ.get("WEBINFER_CACHE", Path.home() / ".cache" / "webinfer")) / "models"


def _folder(name: str, config: dict) -> Path:
    key = hashlib.sha256(repr((VERSION, sorted(config.items()))).encode()).hexdigest()[:10]
    return cache_root() / f"{name}-{key}"


def _complete(out: Path, extra: tuple = ()) -> bool:
    return (out / "done.json").is_file() and all((out / f).is_file() for f in FILES + extra)


def whisper_tiny(config: dict = WHISPER_TINY, name: str = "whisper-tiny-random") -> Path:
    """``config``: WhisperConfig keys (default whisper-tiny's dimensions; a smaller one for quick page tests)."""
    out = _folder(name, config)
    if _complete(out, ("preprocessor_config.json",)):
        return out
    import torch
    from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration

    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    cfg = WhisperConfig(**config)
    cfg._attn_implementation = "eager"
    model = WhisperForConditionalGeneration(cfg).eval()
    model.save_pretrained(out / "torch")  # config.json + weights, as the export starts from
    (out / "config.json").write_text((out / "torch" / "config.json").read_text())
    WhisperFeatureExtractor(feature_size=80).save_pretrained(out)  # preprocessor_config.json
    forced = [[1, WHISPER_SPECIAL["<|en|>"]], [2, WHISPER_SPECIAL["<|transcribe|>"]],
              [3, WHISPER_SPECIAL["<|notimestamps|>"]]]
    _write_json(out / "generation_config.json", {
        "decoder_start_token_id": 50258, "eos_token_id": 50257, "pad_token_id": 50257, "bos_token_id": 50257,
        "forced_decoder_ids": forced, "max_length": 448, "no_timestamps_token_id": 50363,
        "lang_to_id": {"<|en|>": 50259, "<|de|>": 50261}, "task_to_id": {"transcribe": 50359, "translate": 50358},
        "is_multilingual": True})
    (out / "tokenizer.json").write_text(_filler_bpe_tokenizer(cfg.vocab_size, WHISPER_SPECIAL))
    feats = torch.randn(1, cfg.num_mel_bins, 2 * cfg.max_source_positions)
    _export_all(out, model, model.model.encoder, (feats,), ["input_features"],
                {"input_features": {0: "batch_size", 2: "feature_size"}}, cfg, with_mask=False)
    _write_json(out / "done.json", {"version": VERSION})
    return out


def marian_tiny() -> Path:
    out = _folder("marian-tiny-random", MARIAN_TINY)
    if _complete(out):
        return out
    import torch
    from transformers import MarianConfig, MarianMTModel

    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    cfg = MarianConfig(**MARIAN_TINY)
    cfg._attn_implementation = "eager"
    model = MarianMTModel(cfg).eval()
    with torch.no_grad():  # stronger cross-attention than the default init, so the output depends on the source
        for name, p in model.named_parameters():
            if "encoder_attn." in name and "norm" not in name:
                p.normal_(0.0, 0.1)
    model.save_pretrained(out / "torch")
    (out / "config.json").write_text((out / "torch" / "config.json").read_text())
    _write_json(out / "generation_config.json", {"decoder_start_token_id": 2, "eos_token_id": 1, "pad_token_id": 2,
                                                 "bad_words_ids": [[2]], "max_length": 64})
    (out / "tokenizer.json").write_text(_unigram_tokenizer(cfg.vocab_size))
    ids = torch.randint(3, cfg.vocab_size, (2, 5))
    _export_all(out, model, model.model.encoder, (ids, torch.ones_like(ids)), ["input_ids", "attention_mask"],
                {"input_ids": {0: "batch_size", 1: "encoder_sequence_length"},
                 "attention_mask": {0: "batch_size", 1: "encoder_sequence_length"}}, cfg, with_mask=True)
    _write_json(out / "done.json", {"version": VERSION})
    return out


def merged_folder(src: Path, out: Path) -> Path:
    """A copy of the export folder ``src`` whose two decoders are merged as optimum's ``merge_decoders`` does:
    ``decoder_model_merged.onnx``, one ``If`` on the bool input ``use_cache_branch`` (then: the with-past step,
    whose present.N.encoder.* are its cross inputs passed through; else: the first step)."""
    import shutil

    import onnx
    from onnx import helper

    out.mkdir(parents=True, exist_ok=True)
    for name in ("encoder_model.onnx", "config.json", "generation_config.json", "tokenizer.json"):
        shutil.copyfile(src / name, out / name)
    first, step = onnx.load(str(src / "decoder_model.onnx")), onnx.load(str(src / "decoder_with_past_model.onnx"))
    outputs = [o.name for o in first.graph.output]
    then_g = _branch(step.graph, "with_past/", outputs)
    else_g = _branch(first.graph, "no_past/", outputs)
    past = [v for v in step.graph.input if v.name.startswith("past_key_values.")]
    flag = helper.make_tensor_value_info("use_cache_branch", onnx.TensorProto.BOOL, [1])
    node = helper.make_node("If", ["use_cache_branch"], outputs, then_branch=then_g, else_branch=else_g)
    graph = helper.make_graph([node], "merged", list(first.graph.input) + past + [flag], list(first.graph.output))
    model = helper.make_model(graph, opset_imports=list(first.opset_import), ir_version=first.ir_version)
    onnx.save(model, str(out / "decoder_model_merged.onnx"))
    return out


def _branch(g, prefix: str, outputs: list[str]):
    """``g``'s nodes and initializers as an If branch: every name it makes prefixed, its graph inputs read from the
    outer scope, its outputs in ``outputs``' order (a missing present.N.encoder.* is its past input passed on)."""
    from onnx import helper

    made = {x for n in g.node for x in n.output} | {t.name for t in g.initializer}
    ren = lambda x: prefix + x if x in made else x  # noqa: E731
    nodes = []
    for n in g.node:
        m = type(n)()
        m.CopyFrom(n)
        m.input[:] = [ren(x) for x in n.input]
        m.output[:] = [ren(x) for x in n.output]
        m.name = prefix + n.name
        nodes.append(m)
    inits = []
    for t in g.initializer:
        c = type(t)()
        c.CopyFrom(t)
        c.name = prefix + t.name
        inits.append(c)
    have = {o.name: o for o in g.output}
    outs = []
    for name in outputs:
        if name not in have:  # the with-past step returns its cross inputs as they came
            nodes.append(helper.make_node("Identity", [name.replace("present.", "past_key_values.")], [prefix + name]))
        outs.append(helper.make_empty_tensor_value_info(prefix + name))
    for o in outs:
        if o.name[len(prefix):] in have and ren(o.name[len(prefix):]) != o.name:  # an output that is an input
            nodes.append(helper.make_node("Identity", [o.name[len(prefix):]], [o.name]))
    return helper.make_graph(nodes, prefix.strip("/"), [], outs, inits)


def _write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=1))


def _export_all(out: Path, model, encoder, enc_args, enc_names, enc_axes, cfg, with_mask: bool) -> None:
    import torch
    from transformers.cache_utils import EncoderDecoderCache

    layers, heads = cfg.decoder_layers, cfg.decoder_attention_heads
    head_dim = cfg.d_model // heads
    seq_axes = {0: "batch_size", 1: "encoder_sequence_length"}

    class Wrapper(torch.nn.Module):  # (the model as a submodule: its weights stay initializers when traced)
        def __init__(self):
            super().__init__()
            self.model = model

    class Encoder(Wrapper):
        def forward(self, *args):
            return encoder(**dict(zip(enc_names, args))).last_hidden_state

    def flat(cache, cross: bool):
        names, values = [], []
        for i, (sk, sv, *rest) in enumerate(_layers(cache)):
            names += [f"present.{i}.decoder.key", f"present.{i}.decoder.value"]
            values += [sk, sv]
            if cross:
                names += [f"present.{i}.encoder.key", f"present.{i}.encoder.value"]
                values += rest[:2]
        return names, values

    class Decoder(Wrapper):  # decoder_model.onnx: no past in, every present out
        def forward(self, input_ids, encoder_hidden_states, encoder_attention_mask=None):
            o = model(decoder_input_ids=input_ids, encoder_outputs=(encoder_hidden_states,),
                      attention_mask=encoder_attention_mask, use_cache=True)
            return (o.logits, *flat(o.past_key_values, True)[1])

    class DecoderWithPast(Wrapper):  # decoder_with_past_model.onnx: one token, presents of the self-attention
        def forward(self, input_ids, encoder_attention_mask, *past):
            cache = EncoderDecoderCache([tuple(past[4 * i: 4 * i + 4]) for i in range(layers)])
            dummy = torch.zeros(1, 1, cfg.d_model)  # unused: the cross keys/values come from the cache
            o = model(decoder_input_ids=input_ids, encoder_outputs=(dummy,), past_key_values=cache,
                      attention_mask=encoder_attention_mask, use_cache=True)
            return (o.logits, *flat(o.past_key_values, False)[1])

    with torch.no_grad():
        _export(Encoder(), enc_args, out / "encoder_model.onnx", enc_names, ["last_hidden_state"],
                {**enc_axes, "last_hidden_state": seq_axes})
        hidden = Encoder()(*enc_args)
        batch, src = hidden.shape[:2]
        mask = torch.ones(batch, src, dtype=torch.int64)
        dec_ids = torch.randint(3, 100, (batch, 3))
        dec_args = (dec_ids, hidden) + ((mask,) if with_mask else ())
        dec_in = ["input_ids", "encoder_hidden_states"] + (["encoder_attention_mask"] if with_mask else [])
        o = Decoder()(*dec_args)
        present = [f"present.{i}.{w}.{kv}" for i in range(layers) for w in ("decoder", "encoder")
                   for kv in ("key", "value")]
        axes = {"input_ids": {0: "batch_size", 1: "decoder_sequence_length"}, "encoder_hidden_states": seq_axes,
                "encoder_attention_mask": seq_axes, "logits": {0: "batch_size", 1: "decoder_sequence_length"}}
        for n in present:
            axes[n] = {0: "batch_size", 2: "past_decoder_sequence_length + 1" if "decoder" in n
                       else "encoder_sequence_length_out"}
        _export(Decoder(), dec_args, out / "decoder_model.onnx", dec_in, ["logits", *present], axes)
        past = []
        for i in range(layers):  # the presents of a 3-token first step, in optimum's past order
            past += list(o[1 + 4 * i: 5 + 4 * i])
        past_names = [f"past_key_values.{i}.{w}.{kv}" for i in range(layers) for w in ("decoder", "encoder")
                      for kv in ("key", "value")]
        step_args = (dec_ids[:, :1], mask, *past)
        self_present = [n for n in present if ".decoder." in n]
        axes = {"input_ids": {0: "batch_size"}, "encoder_attention_mask": seq_axes,
                "logits": {0: "batch_size"}}
        for n in past_names:
            axes[n] = {0: "batch_size", 2: "past_decoder_sequence_length" if "decoder" in n
                       else "encoder_sequence_length_out"}
        for n in self_present:
            axes[n] = {0: "batch_size", 2: "past_decoder_sequence_length + 1"}
        wrapper = DecoderWithPast()
        names_in = ["input_ids", "encoder_attention_mask", *past_names]
        if not with_mask:  # Whisper's decoder takes no encoder mask: a wrapper without that argument
            class NoMask(Wrapper):
                def forward(self, input_ids, *past):
                    return DecoderWithPast.forward(self, input_ids, None, *past)
            wrapper, step_args, names_in = NoMask(), (step_args[0], *past), ["input_ids", *past_names]
        _export(wrapper, step_args, out / "decoder_with_past_model.onnx", names_in, ["logits", *self_present], axes)
    assert head_dim * heads == cfg.d_model


def _layers(cache):
    """(self k, self v, cross k, cross v) per layer of an EncoderDecoderCache."""
    s, c = cache.self_attention_cache, cache.cross_attention_cache
    return [(s.layers[i].keys, s.layers[i].values, c.layers[i].keys, c.layers[i].values) for i in range(len(s.layers))]


def _export(module, args, path: Path, inputs, outputs, axes) -> None:
    import torch

    tmp = path.with_suffix(".tmp")
    torch.onnx.export(module, args, str(tmp), input_names=inputs, output_names=outputs,
                      dynamic_axes={k: v for k, v in axes.items() if k in inputs + outputs},
                      opset_version=OPSET, do_constant_folding=True, dynamo=False)
    os.replace(tmp, path)


def _filler_bpe_tokenizer(vocab_size: int, special: dict) -> str:
    """A byte-level BPE tokenizer.json with ``vocab_size`` ids: the 256 byte symbols, filler words, and the
    special tokens at their ids (a random-weight model emits any id; each one decodes to some text)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    inv = {v: k for k, v in special.items()}
    for i in range(len(vocab), vocab_size):
        vocab[inv.get(i, f"w{i}")] = i
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(list(special))
    return tok.to_str()


def _unigram_tokenizer(vocab_size: int) -> str:
    """A SentencePiece-style Unigram tokenizer.json (Marian's kind) with </s> appended to every source, trained
    on held text; ids 0..2 are <unk>, </s>, <pad>."""
    from tokenizers import SentencePieceUnigramTokenizer, processors

    text = (Path(__file__).parent / "llm" / "data" / "held_text.txt").read_text().splitlines()
    tok = SentencePieceUnigramTokenizer()
    tok.train_from_iterator(text, vocab_size=vocab_size, special_tokens=["<unk>", "</s>", "<pad>"],
                            unk_token="<unk>", show_progress=False)
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return tok.to_str()


if __name__ == "__main__":
    print(whisper_tiny())
    print(marian_tiny())
