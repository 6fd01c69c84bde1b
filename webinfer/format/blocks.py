"""The manifest's model-level blocks as typed objects: the image prologue (``preprocess``), the task epilogues
(``classify``, ``detect``, ``segment``), the audio prologue (``audio``) and an encoder-decoder's join
(``seq2seq``). Read and checked key by key in format/vision_fields.py, format/audio.py and format/seq2seq.py;
built here from the checked JSON object, written back by ``Manifest.to_json`` (a field that is None is a key
the builder left out). Standard library only."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Preprocess:
    """The image prologue (graph/prepost.py): packed RGBA8 ``image`` in, the model's ``input`` out."""

    image: str
    input: str
    channels: str
    layout: str
    scale: float
    mean: tuple
    std: tuple
    mode: str
    antialias: int
    exclude_outside: int
    cubic_coeff_a: float
    nearest_mode: str
    shorter: int | None = None
    size: tuple | None = None
    crop: tuple | None = None
    letterbox: tuple | None = None
    pad_value: float | None = None
    align: str | None = None


@dataclass(frozen=True)
class Classify:
    """The classification epilogue: the ``top_k`` ``scores`` and class ``indices``; ``labels`` an asset."""

    scores: str
    indices: str
    output: str
    top_k: int
    softmax: bool
    labels: str | None = None


@dataclass(frozen=True)
class Detect:
    """The detection epilogue (graph/vision_epilogues.py): ``detections`` rows of 6 floats and their ``count``."""

    detections: str
    count: str
    output: str
    head: str
    score_threshold: float
    iou_threshold: float
    max_detections: int
    labels: str | None = None


@dataclass(frozen=True)
class Segment:
    """The mask epilogue: ``argmax`` gives a class map (``segments``), ``matte`` a matte and the ``cutout``."""

    mode: str
    output: str
    labels: str | None = None
    segments: str | None = None
    matte: str | None = None
    cutout: str | None = None


@dataclass(frozen=True)
class Audio:
    """The audio prologue (graph/audio_prologue.py): PCM ``audio`` and its ``rate`` (moved to ``rate_dim``)."""

    audio: str
    input: str
    rate: str
    rate_dim: str
    sampling_rate: int
    extractor: str
    features: str
    mel_bins: int | None = None
    n_fft: int | None = None
    hop_length: int | None = None
    n_samples: int | None = None
    normalize: bool | None = None


@dataclass(frozen=True)
class Seq2Seq:
    """How a decoder-step artifact and its nested encoder artifact are joined (format/seq2seq.py)."""

    encoder: str
    cross: tuple[tuple[str, str], ...]
    source_dim: str
    encoder_inputs: tuple[str, ...]
    first_tokens: tuple[int, ...]
    eos: tuple[int, ...]
    model_type: str


BLOCKS = (Preprocess, Classify, Detect, Segment, Audio, Seq2Seq)


def typed(cls, v: dict):
    """The block ``cls`` from its checked JSON object (lists become tuples)."""
    return cls(**{k: _frozen(x) for k, x in v.items()})


def _frozen(x):
    return tuple(_frozen(e) for e in x) if isinstance(x, list) else x
