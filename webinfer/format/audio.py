"""The manifest's optional ``audio`` block: what the audio prologue (graph/audio_prologue.py) expects, so that a
caller or a page feeds PCM (runtime/audio.py). Standard library only."""

from __future__ import annotations


def _name(r, v, p):
    return r.str(v, p, max_len=200)


def _count(r, v, p):
    return r.int(v, p, 1, 2**31 - 1)


_AUDIO = {  # key -> reader; the first five are always there
    "audio": _name, "input": _name, "rate": _name, "rate_dim": _name, "sampling_rate": _count,
    "extractor": lambda r, v, p: r.str(v, p, ("WhisperFeatureExtractor", "Wav2Vec2FeatureExtractor")),
    "features": lambda r, v, p: r.str(v, p, ("log_mel", "waveform")),
    "mel_bins": _count, "n_fft": _count, "hop_length": _count, "n_samples": _count,
    "normalize": lambda r, v, p: v if isinstance(v, bool) else r.fail(p, "expected a boolean"),
}
_REQUIRED = ("audio", "input", "rate", "rate_dim", "sampling_rate", "extractor", "features")


def read_audio(r, v) -> dict | None:
    """The typed ``audio`` block (None when absent); ``r`` is fields._Reader."""
    if v is None:
        return None
    r.obj(v, "audio", _REQUIRED, tuple(k for k in _AUDIO if k not in _REQUIRED))
    for key, value in v.items():
        _AUDIO[key](r, value, f"audio.{key}")
    missing = [k for k in ("mel_bins", "n_fft", "hop_length", "n_samples") if k not in v]
    if v["features"] == "log_mel" and missing:
        r.fail("audio", f"log_mel features need {', '.join(missing)}")
    if v["rate_dim"] not in r.dims:
        r.fail("audio.rate_dim", f"{v['rate_dim'][:40]!r} is not one of the artifact's dims")
    return v
