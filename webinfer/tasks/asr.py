"""Speech recognition: a WAV file (or PCM samples, or log-mel features) -> text, with an encoder-decoder artifact
(Whisper-style, built from an export folder: graph/seq2seq.py) generating on the GPU."""

from __future__ import annotations

import os
import wave
from array import array

from ..errors import WebinferError
from ..llm.seq2seq import Seq2SeqGenerator


class SpeechRecognition:
    """``pipeline("automatic-speech-recognition", art)(audio)`` -> {"text", "token_ids"}."""

    def __init__(self, artifact: str, device=None, kernel_class: str | None = None):
        self.generator = Seq2SeqGenerator.load(artifact, device=device, kernel_class=kernel_class)

    def __call__(self, audio=None, *, features=None, **options) -> dict:
        """``audio``: a WAV path or (samples in [-1, 1], sample rate); ``features``: the encoder's input as the
        model's feature extractor makes it (log-mel [1, mels, frames]), for an artifact whose encoder takes
        features; ``options`` as ``Seq2SeqGenerator.agenerate`` (max_new_tokens, temperature, ...)."""
        tokens = list(self.generator.generate(self.encoder_feeds(audio, features), **options))
        return {"text": self.generator.stats["text"], "token_ids": [t.id for t in tokens]}

    async def call_async(self, audio=None, *, features=None, **options) -> dict:
        ids = [t.id async for t in self.generator.agenerate(self.encoder_feeds(audio, features), **options)]
        return {"text": self.generator.stats["text"], "token_ids": ids}

    def encoder_feeds(self, audio=None, features=None) -> dict:
        """The encoder's feeds: the one seam between the input as the user has it and the artifact. An encoder
        that takes samples (rank <= 2: an audio prologue on the GPU) is fed PCM; one that takes log-mel features
        (rank 3) needs them computed by the caller until an audio prologue is built into the artifact."""
        prologue = self.generator.encoder.spec.audio
        if prologue and features is None and audio is not None:  # features computed on the GPU, from any rate
            samples, rate = read_wav(os.fspath(audio)) if isinstance(audio, (str, os.PathLike)) else audio
            return {prologue.audio: array("f", samples), prologue.rate: int(rate)}
        if prologue and features is not None:
            raise WebinferError("this artifact computes the log-mel features itself (an audio prologue): give the "
                                "audio, not features (build with --preprocess none to feed features)")
        name = self.generator.spec.encoder_inputs[0]
        info = next(io for io in self.generator.encoder.get_inputs() if io.name == name)
        if features is not None:
            return {name: features}
        if audio is None:
            raise WebinferError("give audio (a WAV file or samples) or features")
        samples, rate = read_wav(os.fspath(audio)) if isinstance(audio, (str, os.PathLike)) else audio
        if len(info.shape) == 3:
            raise WebinferError(f"this artifact's encoder takes log-mel features ({name} {info.shape}): give them "
                                "with --features FILE.npy (features=...), or rebuild with an audio prologue")
        return pcm_feeds(name, info, samples, rate)


def pcm_feeds(name: str, info, samples, rate: int) -> dict:
    """PCM for an encoder whose artifact takes samples: float32 [1, n] (and the rate where it has a second
    input for it)."""
    from ..runtime.tensor import HostTensor

    data = array("f", samples)
    return {name: HostTensor("float32", (1, len(data)) if len(info.shape) == 2 else (len(data),), data.tobytes())}


def read_wav(path: str) -> tuple[array, int]:
    """A PCM WAV file (8/16/24/32-bit integers, any rate, channels averaged) as float samples in [-1, 1]."""
    if not os.path.isfile(path):
        raise WebinferError(f"{path}: {'a folder, not a WAV file' if os.path.isdir(path) else 'no such file'}")
    try:
        with wave.open(path, "rb") as w:
            channels, width, rate, count = w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()
            raw = w.readframes(count)
    except (wave.Error, EOFError, OSError) as e:
        raise WebinferError(f"{path}: not a PCM WAV file ({str(e)[:80] or type(e).__name__})") from None
    if width not in (1, 2, 3, 4) or channels < 1 or rate < 1:
        raise WebinferError(f"{path}: unsupported WAV ({width * 8}-bit samples, {channels} channels, {rate} Hz)")
    n = len(raw) // (width * channels)
    if n == 0:
        raise WebinferError(f"{path}: the WAV file holds no samples")
    if width == 1:  # unsigned 8-bit
        values = [b - 128 for b in raw[: n * channels]]
    elif width == 3:
        values = [int.from_bytes(raw[i:i + 3], "little", signed=True) for i in range(0, n * channels * 3, 3)]
    else:
        values = array("h" if width == 2 else "i", raw[: n * channels * width])
    scale = 1.0 / float(1 << (8 * width - 1))
    out = array("f", bytes(4 * n))
    for c in range(channels):
        for i in range(n):
            out[i] += values[i * channels + c] * scale / channels
    return out, rate
