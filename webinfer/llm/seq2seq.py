"""Encoder-decoder generation (speech to text, translation) over an artifact built from an export folder
(graph/seq2seq.py). Standard library only: it runs natively and in Pyodide.

Per input: the encoder artifact runs once and its cross-attention keys/values are copied, on the GPU, into the
decoder's state buffers (they never come back to the host); then the decoder's first tokens (start, language,
task) and each sampled token run one decoder step each, the self-attention keys/values written in place in the
KV cache and the next token sampled on the GPU (4 bytes read back a step). Without a repetition penalty the next
step is launched before the current token is read and takes it on the GPU, as llm/generate.py does.

    s2s = Seq2SeqGenerator.load("whisper.wi")
    ids = [t.id for t in s2s.generate({"input_features": features})]
"""

from __future__ import annotations

import struct
from array import array

from .. import dims as D
from ..dtypes import gpu_nbytes
from ..errors import WebinferError
from ..runtime.audio import pack_audio
from ..runtime.session import SessionCore
from ..runtime.tensor import HostTensor
from .generate import Token, check_options
from .streaming import NoText, iterate_sync
from .tokenizer import Tokenizer


class Seq2SeqGenerator:
    """Streams tokens from an encoder-decoder artifact. One generation at a time."""

    def __init__(self, encoder: SessionCore, decoder: SessionCore, tokenizer: Tokenizer | None = None,
                 encode_text=None):
        spec = decoder.spec.seq2seq
        names = {io.name for io in decoder.spec.inputs}
        if spec is None or "sampling_params" not in names:
            raise WebinferError("this artifact is not an encoder-decoder built for generation (no seq2seq block)")
        self.encoder, self.decoder, self.spec = encoder, decoder, spec
        self.tokenizer = tokenizer
        self._encode_text = encode_text or (
            (lambda text: tokenizer.encode(text, add_special_tokens=True)) if tokenizer is not None else None)
        self._inputs = names
        self._states = {s.name: s.tensor for s in decoder.spec.states}
        cross = {state for _, state in spec.cross}
        self_states = [tid for name, tid in self._states.items() if name not in cross]
        self.past_dim = decoder.tensors[self_states[0]].shape[2]
        self.max_seq = decoder.bounds[self.past_dim]
        self.max_source = decoder.bounds[spec.source_dim]
        self._penalty_len = decoder.input_tensor("penalty_ids").shape[0]
        self.first_tokens = list(spec.first_tokens)
        self.eos = set(spec.eos)
        self.stats: dict = {}

    @classmethod
    def load(cls, path: str, device=None, kernel_class: str | None = None) -> "Seq2SeqGenerator":
        """Open the artifact and its nested encoder natively (wgpu-py), on one device."""
        import os

        from ..artifact import Artifact
        from .generate import artifact_assets

        if device is None:
            from ..runtime.native import NativeDevice

            device = NativeDevice()
        cores = []
        art = Artifact.load(path)
        join = art.spec.seq2seq
        if join is None:
            raise WebinferError(f"{path}: not an encoder-decoder artifact (build it from an export folder holding "
                                "encoder_model.onnx and the decoder files)")
        for a in (Artifact.load(os.path.join(path, join.encoder)), art):
            cores.append(SessionCore(a.manifest, a.shader, a.read_shard, device, kernel_class=kernel_class,
                                     spec=a.spec))
        if "assets/tokenizer.json" not in art.spec.assets:
            return cls(*cores)
        tok_json, cfg_json = artifact_assets(art.spec, art.read)
        return cls(*cores, Tokenizer.from_json(tok_json, cfg_json), _native_text_encoder(tok_json))

    # -- the encoder ----------------------------------------------------------------------------------
    def text_feeds(self, text: str) -> dict:
        """A translation encoder's feeds: the source text's ids (with the tokenizer's special tokens) and a mask."""
        if self._encode_text is None:
            raise WebinferError("the artifact has no tokenizer (build from a folder holding tokenizer.json)")
        ids = list(self._encode_text(text))
        if not ids:
            raise WebinferError("the text is empty")
        feeds = {"input_ids": HostTensor("int64", (1, len(ids)), array("q", ids).tobytes())}
        if "attention_mask" in self.spec.encoder_inputs:
            feeds["attention_mask"] = HostTensor("int64", (1, len(ids)), array("q", [1] * len(ids)).tobytes())
        return feeds

    def encode(self, feeds: dict) -> int:
        """Run the encoder and copy its cross keys/values into the decoder's states (all on the GPU); returns the
        source length."""
        enc = self.encoder
        if enc.control:
            raise WebinferError("encoders with control flow (If/Loop) are not supported for generation yet")
        feeds, dims = pack_audio(enc.spec, feeds, None)  # (an audio prologue: PCM and its sample rate)
        env, host = enc.bind_feeds(feeds, dims)
        plan = enc.plan(env)
        enc.write_inputs(plan, host)
        outputs = {io.name: io.tensor for io in enc.program.outputs}
        copies, source = [], None
        for out, state in self.spec.cross:
            tid = outputs[out]
            shape = [D.evaluate(d, env) for d in enc.tensors[tid].shape]
            if source is None:
                source = shape[2]
            if source > self.max_source:
                raise WebinferError(f"the input is {source} positions long after the encoder; this artifact holds "
                                    f"at most {self.max_source}")
            n = 1
            for d in shape:
                n *= d
            copies.append((plan.buffer_of(tid), 0, self.decoder.states[self._states[state]], 0,
                           gpu_nbytes(enc.tensors[tid].dtype, n)))
        enc.device.submit(plan.dispatches, copies)
        return source

    # -- the decoder ----------------------------------------------------------------------------------
    def generate(self, feeds: dict, **options):
        """Synchronous iterator of Tokens (native devices); options as ``agenerate``."""
        return iterate_sync(self.agenerate(feeds, **options))

    async def agenerate(self, feeds: dict, *, prompt: list | None = None, max_new_tokens: int | None = None,
                        temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                        repetition_penalty: float = 1.0, seed: int = 0, stop_at_eos: bool = True):
        """Async iterator of Tokens for one input. ``feeds``: the encoder's inputs; ``prompt``: the decoder's first
        ids (default: the artifact's start and forced tokens); ``max_new_tokens`` None: 64, or what the
        decoder's positions leave after ``ids`` when that is fewer (a small model's 64 positions)."""
        ids = list(self.first_tokens if prompt is None else prompt)
        if not ids:
            raise WebinferError("the decoder needs at least one first token")
        if max_new_tokens is None:
            max_new_tokens = max(1, min(64, self.max_seq - len(ids)))
        check_options(max_new_tokens, temperature, top_k, top_p, repetition_penalty, seed)
        if len(ids) + max_new_tokens > self.max_seq:
            raise WebinferError(f"{len(ids)} first tokens + max_new_tokens ({max_new_tokens}) exceed the decoder's "
                                f"{self.max_seq} positions (ask for fewer tokens, or rebuild with a larger --max-seq)")
        source = self.encode(feeds)
        params = struct.pack("<4f", temperature, float(top_k), top_p, repetition_penalty)
        decoder = self.tokenizer.stream_decoder(skip_special_tokens=True) if self.tokenizer else NoText()
        history, out_ids = list(ids), []
        self.stats = {"prompt_ids": list(ids), "token_ids": out_ids, "text": "", "source_length": source}
        for pos, t in enumerate(ids[:-1]):  # the first tokens but the last: their keys/values only
            await self.decoder.collect(self._launch([t], pos, source, params, seed, 0, history, None, False))
        overlap = repetition_penalty == 1.0
        pos = len(ids) - 1
        # (launched as overlapping too: overlapping runs alternate two readback sets, and a step read while the next
        # one is in flight must not share its set)
        ticket = self._launch([ids[-1]], pos, source, params, seed, 0, history, None, overlap)
        for step in range(max_new_tokens):
            nxt = None
            if overlap and step + 1 < max_new_tokens:  # the next step takes this one's token on the GPU
                nxt = self._launch([0], pos + 1, source, params, seed, step + 1, [], ticket.outputs["next_token"],
                                   True)
            (tok,) = await self.decoder.collect(ticket)
            token = struct.unpack("<i", tok.data[:4])[0]
            out_ids.append(token)
            history.append(token)
            text = decoder.push(token)
            self.stats["text"] += text
            yield Token(token, text)
            if (stop_at_eos and token in self.eos) or step + 1 == max_new_tokens:
                if nxt is not None:  # (the launched step must finish before the buffers are used again)
                    await self.decoder.collect(nxt)
                break
            if not overlap:
                nxt = self._launch([token], pos + 1, source, params, seed, step + 1, history, None, False)
            ticket, pos = nxt, pos + 1
        self.stats["text"] += decoder.flush()

    def _launch(self, ids, pos, source, params, seed, step, history, token_buffer, overlap) -> dict:
        pen = array("i", history[-self._penalty_len:])
        pen.extend([-1] * (self._penalty_len - len(pen)))
        n = len(ids)
        feeds = {
            "input_ids": HostTensor("int64", (1, n), array("q", ids).tobytes()),
            "encoder_attention_mask": HostTensor("int64", (1, source), array("q", [1] * source).tobytes()),
            "attention_mask": HostTensor("int64", (1, pos + n), array("q", [1] * (pos + n)).tobytes()),
            "sampling_params": HostTensor("float32", (4,), params),
            "sampling_seed": HostTensor("uint32", (2,), struct.pack("<2I", seed & 0xFFFFFFFF, step)),
            "penalty_ids": HostTensor("int32", (self._penalty_len,), pen.tobytes()),
        }
        feeds.update(neutral_step_feeds(self.decoder))
        feeds = {k: v for k, v in feeds.items() if k in self._inputs}
        gpu = {"input_ids": (token_buffer, 4)} if token_buffer is not None else None
        return self.decoder.launch(["next_token"], feeds, {self.past_dim: pos, self.spec.source_dim: source},
                                   gpu_inputs=gpu, overlap=overlap)

    def release(self) -> None:
        self.encoder.release()
        self.decoder.release()


def _native_text_encoder(tokenizer_json: str):
    """The `tokenizers` package's encoder (special tokens added, as a translation source needs), else None."""
    try:
        from tokenizers import Tokenizer as HFTokenizer
    except ImportError:
        return None
    hf = HFTokenizer.from_str(tokenizer_json)
    return lambda text: hf.encode(text, add_special_tokens=True).ids


__all__ = ["Seq2SeqGenerator"]


def neutral_step_feeds(core: SessionCore) -> dict:
    """Feeds that leave a generation step as plain decoding, for the inputs a generation build adds beyond the
    sampler's (speculative verification ``verify_ids``, ``logit_bias`` / ``logprobs_k``, the constraint's
    ``token_mask``): none verified, no bias, no logprobs, every token allowed."""
    shapes = {io.name: core.tensors[io.tensor].shape for io in core.spec.inputs}
    feeds = {}
    if "verify_ids" in shapes:
        feeds["verify_ids"] = HostTensor("int32", (1,), array("i", [-1]).tobytes())
    if isinstance((shapes.get("logit_bias") or [None])[0], int):
        feeds["logit_bias"] = HostTensor("float32", (shapes["logit_bias"][0],), bytes(4 * shapes["logit_bias"][0]))
    if "logprobs_k" in shapes:
        feeds["logprobs_k"] = HostTensor("uint32", (1,), struct.pack("<I", 0xFFFFFFFF))
    if isinstance((shapes.get("token_mask") or [None])[0], int):
        feeds["token_mask"] = HostTensor("uint32", (shapes["token_mask"][0],), b"\xff" * (4 * shapes["token_mask"][0]))
    return feeds
