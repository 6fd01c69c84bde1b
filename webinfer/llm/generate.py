"""Text generation over an artifact built from a decoder with a KV cache. Standard library only.

The artifact (see graph/llm) keeps the KV cache in GPU buffers of ``max_seq`` positions and samples the
next token on the GPU, so a step uploads a few small inputs (the new token ids, positions, the sampling
settings) and reads back one 4-byte token id. The prompt runs as one prefill step; each new token is one
decode step. Natively, prompts are encoded with the ``tokenizers`` package when it is installed (the
pure-Python tokenizer gives the same ids, and is what runs in the browser).

The cache outlives a generation: the Generator remembers which token ids its positions hold, and a prompt
that starts with them prefills only the rest (prefix reuse for one sequence, like vLLM's automatic prefix
caching). So a chat that sends the whole conversation each turn prefills only the new turn's tokens.

    gen = Generator.load("smollm2.wi")
    for tok in gen.generate("The capital of France is", max_new_tokens=16):
        print(tok.text, end="")
    gen.stats  # prompt_ids, token_ids, text, ttft_s, prefill_tok_s, decode_tok_s, reused_tokens
    messages = [{"role": "user", "content": "Hi!"}]
    answer = "".join(t.text for t in gen.chat(messages))   # the model's chat template
    messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": "And then?"}]
    for tok in gen.chat(messages): ...                      # prefills only the new turn
"""

from __future__ import annotations

import struct
import time
from array import array
from dataclasses import dataclass

from ..errors import WebinferError
from ..format.schema import Manifest
from ..runtime.session import SessionCore, run_sync
from ..runtime.tensor import HostTensor
from .chat_checks import check_messages, check_options  # noqa: F401 (check_options: seq2seq, cli_generate)
from .logit_options import LogitOptions
from .streaming import NoText, common_prefix, iterate_sync
from .tokenizer import Tokenizer


@dataclass
class Token:
    id: int
    text: str  # the text this token completes (may be "" while a UTF-8 sequence is incomplete)


class Generator:
    """Streams tokens from a generation artifact. One generation at a time per Generator."""

    def __init__(self, core: SessionCore, tokenizer: Tokenizer | None, encoder=None):
        names = {io.name for io in core.spec.inputs}
        if "sampling_params" not in names or not core.spec.states:
            raise WebinferError("this artifact was not built for generation (no KV cache / sampling head)")
        self.core = core
        self.tokenizer = tokenizer
        self._encode = encoder or (tokenizer.encode if tokenizer is not None else None)
        self.past_dim = next(d for d in core.bounds if d != "total_sequence")
        self.max_seq = core.bounds[self.past_dim]
        self._penalty_len = core.input_tensor("penalty_ids").shape[0]
        self._inputs = names
        self.logit_options = LogitOptions(core)  # a request's logit_bias / logprobs (llm/logit_options.py)
        mask = core.input_tensor("token_mask")
        self._mask_words = mask.shape[0] if mask is not None else 0
        self._all_tokens = b"\xff" * (4 * self._mask_words)
        self._cancelled = False
        self._cached: list[int] = []  # the token ids whose keys/values the cache holds, from position 0
        self.artifact_sha256: str | None = None  # the manifest's sha256: a saved prefix cache's identity
        self.stats: dict = {}

    # -- loading ------------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str, device=None, kernel_class: str | None = None) -> "Generator":
        """Open an artifact natively (wgpu-py); the tokenizer comes from the artifact's assets (without one,
        prompts are token ids and tokens have no text). ``kernel_class`` forces one of its programs
        (runtime/select.py)."""
        from ..artifact import Artifact

        art = Artifact.load(path)
        if device is None:
            from ..runtime.native import NativeDevice

            device = NativeDevice()
        core = SessionCore(art.manifest, art.shader, art.read_shard, device, kernel_class=kernel_class,
                           spec=art.spec)
        if "assets/tokenizer.json" not in art.spec.assets:
            gen = cls(core, None)
        else:
            tok_json, cfg_json = artifact_assets(art.spec, art.read)
            gen = cls(core, Tokenizer.from_json(tok_json, cfg_json), _native_encoder(tok_json))
        gen.artifact_sha256 = art.manifest_sha256
        return gen

    # -- a prefix cache that outlives the process (prefix_cache.py) ---------------------------------
    def save_prefix(self, path: str, positions: int | None = None) -> int:
        """Write the keys and values of the first ``positions`` (default: all) positions the cache holds, with
        their token ids and the artifact's identity, to ``path``; returns how many."""
        from .prefix_cache import asave

        blob = run_sync(asave(self, positions))
        try:
            with open(path, "wb") as f:
                f.write(blob)
        except OSError as e:
            raise WebinferError(f"{path}: cannot write the prefix cache ({e.strerror})") from None
        return len(self._cached) if positions is None else positions

    def load_prefix(self, path: str, prompt=None) -> int:
        """Restore a saved prefix into the cache (refused with an error when altered or from another artifact);
        with ``prompt`` (text or ids) only the positions it shares. The next generation prefills the rest."""
        from .prefix_cache import restore

        try:
            with open(path, "rb") as f:
                blob = f.read()
        except OSError as e:
            raise WebinferError(f"{path}: cannot read the prefix cache ({e.strerror})") from None
        ids = None if prompt is None else list(prompt) if isinstance(prompt, (list, tuple)) else self.prompt_ids(prompt)
        try:
            return restore(self, blob, ids)
        except WebinferError as e:
            raise WebinferError(f"{path}: {e}") from None

    # -- generation ---------------------------------------------------------------------------------
    def cancel(self) -> None:
        """Stop the running generation after the current step; the session stays usable."""
        self._cancelled = True

    def reset(self) -> None:
        """Forget the cached prefix: the next prompt is prefilled from position 0."""
        self._cached = []

    def prompt_ids(self, prompt: str, chat: bool = False, system: str | None = None) -> list[int]:
        if self.tokenizer is None:
            raise WebinferError("the artifact has no tokenizer (build from a folder holding tokenizer.json): "
                                "give the prompt as token ids")
        if chat:
            messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user",
                                                                                     "content": prompt}]
            return self.chat_ids(messages)
        return list(self._encode(prompt))

    def chat_ids(self, messages) -> list[int]:
        """The conversation rendered with the model's chat template, ending with the assistant's turn opening."""
        check_messages(messages)
        text = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
        return list(self._encode(text))

    def chat(self, messages, **options):
        """Stream the assistant's answer to OpenAI-style ``messages`` ([{"role", "content"}, ...]); the turns
        the cache already holds are not prefilled again. Options as ``generate``."""
        return self.generate(self.chat_ids(messages), **options)

    async def achat(self, messages, **options):
        """Async form of ``chat`` (Pyodide)."""
        async for tok in self.agenerate(self.chat_ids(messages), **options):
            yield tok

    def generate(self, prompt, **options):
        """Synchronous iterator of Tokens (native devices)."""
        return iterate_sync(self.agenerate(prompt, **options))

    async def agenerate(self, prompt, *, chat: bool = False, max_new_tokens: int = 64, temperature: float = 0.0,
                        top_k: int = 0, top_p: float = 1.0, repetition_penalty: float = 1.0, seed: int = 0,
                        stop_at_eos: bool = True, system: str | None = None, speculative=None,
                        draft_tokens: int | None = None, constraint=None):
        """Async iterator of Tokens. ``prompt`` is text (or a list of token ids). ``speculative``: "ngram" or
        a draft Generator, proposing ``draft_tokens`` tokens a step (default 7 / 4: llm/speculative.py).
        ``constraint`` (llm/constrain): the output must match it; its allowed-token mask is applied on the GPU
        each step, and the generation ends when the constraint allows nothing more."""
        ids = list(prompt) if isinstance(prompt, (list, tuple)) else self.prompt_ids(prompt, chat, system)
        check_options(max_new_tokens, temperature, top_k, top_p, repetition_penalty, seed)
        if not ids:
            raise WebinferError("the prompt is empty")
        if len(ids) + max_new_tokens > self.max_seq:
            raise WebinferError(f"prompt ({len(ids)} tokens) + max_new_tokens ({max_new_tokens}) exceeds the KV "
                                f"cache of {self.max_seq} positions (start a new conversation, ask for fewer "
                                "tokens, or rebuild with a larger --max-seq)")
        matcher = self._matcher(constraint)
        self._cancelled = False
        eos = self.tokenizer.eos_token_id if (stop_at_eos or matcher) and self.tokenizer is not None else None
        if speculative is not None:
            if matcher is not None:  # (VerifyDraft does not apply the token mask)
                raise WebinferError("speculative decoding with a constraint is not supported yet: use one or the other")
            from .speculative import agenerate_speculative

            async for tok in agenerate_speculative(self, ids, speculative, draft_tokens, Token, eos=eos, seed=seed,
                                                   max_new_tokens=max_new_tokens, temperature=temperature,
                                                   top_k=top_k, top_p=top_p, repetition_penalty=repetition_penalty):
                yield tok
            return
        params = struct.pack("<4f", temperature, float(top_k), top_p, repetition_penalty)
        history = list(ids)
        decoder = self.tokenizer.stream_decoder(skip_special_tokens=True) if self.tokenizer is not None else NoText()
        out_ids: list[int] = []
        reused = common_prefix(self._cached, ids, len(ids) - 1)  # at least one token to prefill
        self.stats = {"prompt_ids": list(ids), "token_ids": out_ids, "text": "", "reused_tokens": reused}
        t0 = time.perf_counter()
        t_first = None
        # Without a repetition penalty the next step needs nothing from the host: it is launched before the
        # current token is read, and takes that token on the GPU (one step stays in flight).
        # A constraint's mask depends on the token just sampled: its steps wait for it.
        overlap = repetition_penalty == 1.0 and matcher is None
        self._cached = []  # unknown while steps run; set again when the generation ends without an error
        ticket = self._launch(ids[reused:], reused, params, seed, 0, history if not overlap else [], None, overlap,
                              mask=self._mask(matcher))
        pos = len(ids)
        failed = True
        try:
            for step in range(max_new_tokens):
                nxt = None
                if overlap and step + 1 < max_new_tokens and not self._cancelled:
                    nxt = self._launch([0], pos, params, seed, step + 1, [], ticket.outputs["next_token"], True)
                tok, *extra = await self.core.collect(ticket)
                self.logit_options.collected(extra)
                token = struct.unpack("<i", tok.data[:4])[0]
                if t_first is None:
                    t_first = time.perf_counter()
                out_ids.append(token)
                history.append(token)
                text = decoder.push(token)
                self.stats["text"] += text
                failed = False  # from here on a stop (the caller's, cancel) leaves the cache consistent
                yield Token(token, text)
                if token == eos or self._cancelled or step + 1 == max_new_tokens:
                    break
                if matcher is not None:
                    matcher.advance(token)
                    if matcher.finished():
                        break
                failed = True
                if not overlap:
                    nxt = self._launch([token], pos, params, seed, step + 1, history, None, False,
                                       mask=self._mask(matcher))
                ticket, pos = nxt, pos + 1
        finally:
            # Every token but the last was fed to a step that was submitted: its keys and values are in place.
            self._cached = [] if failed else ids + out_ids[:-1]
        tail = decoder.flush()
        self.stats["text"] += tail
        t_end = time.perf_counter()
        n_decode = len(out_ids) - 1
        self.stats.update({
            "ttft_s": (t_first - t0) if t_first else None,
            "prefill_tok_s": (len(ids) - reused) / (t_first - t0) if t_first else None,
            "decode_tok_s": n_decode / (t_end - t_first) if t_first and n_decode > 0 and t_end > t_first else None,
            "cancelled": self._cancelled,
        })

    def _matcher(self, constraint):
        if constraint is None:
            return None
        if "token_mask" not in self._inputs:
            raise WebinferError("this artifact was built before constrained decoding (no token_mask input): "
                                "rebuild it to use a constraint")
        return constraint.matcher()

    def _mask(self, matcher) -> bytes | None:
        return matcher.mask(self._mask_words) if matcher is not None else None

    def _launch(self, ids: list[int], pos: int, params: bytes, seed: int, step: int, history: list[int],
                token_buffer, overlap: bool, outputs: tuple = ("next_token",), verify: list[int] | None = None,
                mask: bytes | None = None) -> dict:
        """Submit one step. ``token_buffer``: the GPU buffer holding the previous step's sampled token, copied
        into input_ids on the GPU (``ids`` then only gives the shape). ``outputs``: what to read back.
        ``verify``: the draft tokens this step checks (llm/speculative.py), one per id, the last unused.
        ``mask``: the allowed-token bitmask (None: every token)."""
        n = len(ids)
        pen = array("i", history[-self._penalty_len:])
        pen.extend([-1] * (self._penalty_len - len(pen)))
        feeds = {
            "input_ids": HostTensor("int64", (1, n), array("q", ids).tobytes()),
            "attention_mask": HostTensor("int64", (1, pos + n), array("q", [1] * (pos + n)).tobytes()),
            "position_ids": HostTensor("int64", (1, n), array("q", range(pos, pos + n)).tobytes()),
            "sampling_params": HostTensor("float32", (4,), params),
            "sampling_seed": HostTensor("uint32", (2,), struct.pack("<2I", seed & 0xFFFFFFFF, step)),
            "penalty_ids": HostTensor("int32", (self._penalty_len,), pen.tobytes()),
            "verify_ids": HostTensor("int32", (len(verify or [0]),), array("i", verify or [-1]).tobytes()),
        }
        feeds.update(self.logit_options.feeds())
        if "token_mask" in self._inputs:
            feeds["token_mask"] = HostTensor("uint32", (self._mask_words,), mask or self._all_tokens)
        feeds = {k: v for k, v in feeds.items() if k in self._inputs}
        gpu = {"input_ids": (token_buffer, 4)} if token_buffer is not None else None
        return self.core.launch(list(outputs) + self.logit_options.outputs, feeds, {self.past_dim: pos},
                                gpu_inputs=gpu, overlap=overlap)


def artifact_assets(spec: Manifest, read) -> tuple[str, str | None]:
    assets = spec.assets
    if "assets/tokenizer.json" not in assets:
        raise WebinferError("the artifact has no tokenizer (build from a folder holding tokenizer.json)")
    tok = read(assets["assets/tokenizer.json"]).decode("utf-8")
    cfg = assets.get("assets/tokenizer_config.json")
    return tok, read(cfg).decode("utf-8") if cfg else None


def _native_encoder(tokenizer_json: str):
    """The `tokenizers` package's encoder when installed (natively), else None (pure Python)."""
    try:
        from tokenizers import Tokenizer as HFTokenizer
    except ImportError:
        return None
    hf = HFTokenizer.from_str(tokenizer_json)
    return lambda text: hf.encode(text, add_special_tokens=False).ids


__all__ = ["Generator", "Token"]
