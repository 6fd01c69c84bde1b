"""The text side of the page's CPU path, in Pyodide (standard library only).

On the CPU path the model runs on onnxruntime-web (site/cpu.mjs, site/cpu-chat.mjs) and no GPU is opened, but
text goes through the same Python the WebGPU path uses: the artifact's tokenizer (``llm.load_tokenizer``: the
pure-Python BPE / WordPiece that equals `tokenizers`), the model's chat template (``llm/chat_template.py``),
the stream decoder and the sampling options' checks. One implementation of each keeps both paths' prompt ids
and streamed text equal; the cost is Pyodide's start (a few seconds, overlapping the model's session), kept
small by importing only the tokenizer and the request checks.
"""

from __future__ import annotations

import json

from .errors import WebinferError
from .llm.chat_checks import check_messages, check_options

# The options chat() takes, with the WebGPU path's defaults (llm/generate.py Generator.agenerate).
DEFAULTS = {"max_new_tokens": 64, "temperature": 0.0, "top_k": 0, "top_p": 1.0, "repetition_penalty": 1.0,
            "seed": 0, "stop_at_eos": True}


class CpuText:
    """Tokenizer, chat template and stream decoder of one artifact opened on the CPU path."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self._decoder = None

    @classmethod
    def from_texts(cls, tokenizer_json: str, config_json: str | None = None) -> CpuText:
        """The artifact's tokenizer.json (and tokenizer_config.json), fetched by the worker and checked against
        the manifest's sha256 (cpu.mjs): Python neither fetches the manifest again nor imports its schema."""
        from .llm import load_tokenizer

        return cls(load_tokenizer(str(tokenizer_json), None if config_json is None else str(config_json)))

    @property
    def eos_token_id(self) -> int:
        eos = getattr(self.tokenizer, "eos_token_id", None)
        return -1 if eos is None else int(eos)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (special tokens as the tokenizer's post-processor adds them)."""
        ids = self.tokenizer.encode(str(text))
        return list(getattr(ids, "ids", ids))

    def chat_ids(self, messages_json: str) -> list[int]:
        """The conversation with the model's chat template, ending with the assistant's turn opening."""
        messages = json.loads(messages_json)
        check_messages(messages)
        text = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
        return list(self.tokenizer.encode(text))

    def options(self, options_json: str) -> str:
        """chat()'s options checked as the WebGPU path checks them, defaults filled in (JSON)."""
        options = json.loads(options_json)
        unknown = sorted(set(options) - set(DEFAULTS))
        if unknown:
            raise WebinferError(f"unknown chat option {unknown[0]!r}")
        full = {**DEFAULTS, **options}
        check_options(full["max_new_tokens"], full["temperature"], full["top_k"], full["top_p"],
                      full["repetition_penalty"], full["seed"])
        return json.dumps(full)

    def start(self) -> None:
        """A new reply: a fresh stream decoder (special tokens skipped, as the WebGPU path's)."""
        self._decoder = self.tokenizer.stream_decoder(skip_special_tokens=True)

    def push(self, token: int) -> str:
        return self._decoder.push(int(token))

    def flush(self) -> str:
        return self._decoder.flush()
