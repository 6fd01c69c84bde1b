"""Per-request ``logit_bias`` and ``logprobs`` for a Generator, over the inputs graph/llm/logit_extras.py adds.

The generator feeds ``logit_bias`` (float32 [vocab], zeros unless a request sets a bias) and ``logprobs_k``
(0xffffffff: no logprobs, the GPU kernel returns at once) each step; when logprobs are asked for, the step
also reads back ``token_logprobs`` (41 floats: the sampled token's log-probability, the top 20 values, their
ids), collected here one entry per token. Artifacts built before these inputs get a one-line refusal when a
request needs them. Standard library only.
"""

from __future__ import annotations

import struct

from ..errors import WebinferError
from ..runtime.tensor import HostTensor

OFF = 0xFFFFFFFF
TOP = 20
BIAS_MIN, BIAS_MAX = -100.0, 100.0  # OpenAI's range


class LogitOptions:
    def __init__(self, core):
        bias = core.input_tensor("logit_bias")
        self.available = bias is not None and core.input_tensor("logprobs_k") is not None
        self.vocab = bias.shape[0] if self.available else 0
        self._zeros = bytes(4 * self.vocab)
        self.reset()

    def reset(self) -> None:
        """Back to no bias and no logprobs (after each request)."""
        self._bias = self._zeros
        self.k = None
        self.results: list[list[float]] = []

    def configure(self, bias: dict[int, float] | None = None, k: int | None = None) -> None:
        """``bias``: token id -> value added to its logit; ``k``: logprobs with the top ``k`` (0..20) tokens."""
        if (bias or k is not None) and not self.available:
            raise WebinferError("this artifact was built before logit_bias/logprobs support: rebuild it")
        self.reset()
        if bias:
            data = bytearray(self._zeros)
            for token, value in bias.items():
                if not 0 <= token < self.vocab:
                    raise WebinferError(f"logit_bias: token id {token} is outside the vocabulary (0..{self.vocab - 1})")
                struct.pack_into("<f", data, 4 * token, value)
            self._bias = bytes(data)
        if k is not None:
            if not 0 <= k <= TOP:
                raise WebinferError(f"top_logprobs must be in 0..{TOP}")
            self.k = k

    @property
    def active(self) -> bool:
        """Whether the current request sets a bias or asks for logprobs."""
        return self._bias is not self._zeros or self.k is not None

    @property
    def outputs(self) -> list[str]:
        return ["token_logprobs"] if self.k is not None else []

    def feeds(self) -> dict[str, HostTensor]:
        if not self.available:
            return {}
        return {"logit_bias": HostTensor("float32", (self.vocab,), self._bias),
                "logprobs_k": HostTensor("uint32", (1,), struct.pack("<I", OFF if self.k is None else self.k))}

    def collected(self, outputs: list) -> None:
        """The extra outputs of one step, in ``outputs``' order."""
        if outputs and self.k is not None:
            raw = struct.unpack(f"<{1 + 2 * TOP}f", bytes(outputs[0].data)[:4 * (1 + 2 * TOP)])
            self.results.append(list(raw))

    def entry(self, token: int, raw: list[float], decode) -> dict:
        """OpenAI's per-token logprobs object: {token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}."""
        def one(tid: int, lp: float) -> dict:
            text = decode(tid)
            return {"token": text, "logprob": lp, "bytes": list(text.encode("utf-8"))}

        top = [one(int(raw[1 + TOP + i]), raw[1 + i]) for i in range(self.k or 0)]
        return {**one(token, raw[0]), "top_logprobs": top}


def parse_logit_bias(value) -> dict[int, float]:
    """OpenAI's ``logit_bias``: {"token id": bias in [-100, 100]} (JSON keys are strings)."""
    if not isinstance(value, dict):
        raise WebinferError("logit_bias must be an object mapping token ids to numbers in [-100, 100]")
    out = {}
    for key, bias in value.items():
        try:
            token = int(key)
        except (TypeError, ValueError):
            raise WebinferError(f"logit_bias: {key!r} is not a token id") from None
        if isinstance(bias, bool) or not isinstance(bias, (int, float)) or not BIAS_MIN <= bias <= BIAS_MAX:
            raise WebinferError(f"logit_bias[{key!r}] must be a number in [-100, 100]")
        out[token] = float(bias)
    return out
