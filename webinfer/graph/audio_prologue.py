"""The audio prologue: PCM at any sample rate in, the model's audio features computed on the GPU.

``--preprocess audio`` (the ``preprocessor_config.json`` beside the model), a dict or a JSON file of the same
keys: a new input ``audio`` (float32 [channels, samples]; mono is [1, samples]) and a dim ``audio_rate`` (its sample rate, bound per run: runtime/audio.py) replace the model's
audio input. The channels are averaged, ``webinfer.Resample`` brings the rate to the model's
(codegen/kernels/audio.py), then as ONNX nodes:
- ``WhisperFeatureExtractor``: pad/truncate to ``n_samples``, reflect-pad n_fft // 2, frames as row slices of
  the signal (hop-sized rows), one MatMul by the periodic-Hann-windowed DFT basis (cos | -sin, float64 at
  build), squares, one MatMul by the Slaney mel bank stacked twice (re^2 + im^2 summed in the product),
  log10, clamp to max - 8, (x + 4) / 4: transformers' numpy features ([1, mels, n_samples // hop]).
  The DFT is a matmul rather than the STFT op's direct kernel (dft.wgsl.j2): on lavapipe 0.7-0.9 s against
  12.6 s for Whisper's 3001 frames, equally exact (2.2e-5 and 2.4e-5 from numpy's float64 rfft; docs/notes.md).
- ``Wav2Vec2FeatureExtractor``: the waveform, zero-mean unit-variance when ``do_normalize`` ([1, samples]).
The entry point is ``add_audio_prologue(ir_model, spec)``; ``audio_spec(path)`` reads an export folder's config.
"""

from __future__ import annotations

import json
import os

import numpy as np
import onnx_ir as ir

from ..errors import WebinferError
from .passes._util import new_initializer
from .prepost import DOMAIN, read_spec

CONFIG = "preprocessor_config.json"
EXTRACTORS = ("WhisperFeatureExtractor", "Wav2Vec2FeatureExtractor")
AUDIO_KEYS = {"input", "name", "feature_extractor_type", "feature_size", "num_mel_bins", "sampling_rate",
              "hop_length", "n_fft", "chunk_length", "n_samples", "nb_max_frames", "do_normalize", "padding_value",
              "dither", "return_attention_mask", "padding_side", "processor_class"}


def audio_spec(path: str, strict: bool = True) -> dict | None:
    """The audio keys of ``preprocessor_config.json`` in ``path`` (a folder, or a model file's folder), or None
    when there is none or it names no feature extractor webinfer computes (or, not ``strict``, is not JSON)."""
    folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    file = os.path.join(folder, CONFIG)
    if not os.path.isfile(file):
        return None
    try:
        with open(file, encoding="utf-8") as f:
            config = json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        if not strict:
            return None
        raise WebinferError(f"{file}: not valid JSON ({e})") from None
    if not isinstance(config, dict) or config.get("feature_extractor_type") not in EXTRACTORS:
        return None
    return {k: v for k, v in config.items() if k in AUDIO_KEYS}


def is_audio_spec(spec) -> bool:
    """``"audio"``, or a dict / JSON file naming a feature extractor (else ``--preprocess`` is an image spec)."""
    if isinstance(spec, str) and spec == "audio":
        return True
    if isinstance(spec, (str, os.PathLike)) and os.path.isfile(spec):
        try:
            with open(spec, encoding="utf-8") as f:
                spec = json.load(f)
        except ValueError:
            return False
    return isinstance(spec, dict) and "feature_extractor_type" in spec


def takes_features(model: ir.Model, spec: dict) -> bool:
    """Whether the model has the input the extractor feeds (``input_features`` [batch, mels, frames] for
    Whisper, ``input_values`` for a raw-audio encoder): an export's decoder beside the config has none."""
    whisper = spec.get("feature_extractor_type") == "WhisperFeatureExtractor"
    mels = spec.get("feature_size", spec.get("num_mel_bins", 80))
    for v in model.graph.inputs:
        if v.is_initializer() or v.shape is None:
            continue
        if v.name == ("input_features" if whisper else "input_values") or (
                whisper and len(v.shape) == 3 and v.shape[1] == mels and v.dtype is not None
                and v.dtype.is_floating_point()):
            return True
    return False


def _int(spec: dict, key: str, default=None, alias: str | None = None) -> int:
    v = spec.get(key, spec.get(alias, default) if alias else default)
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise WebinferError(f"--preprocess: {key} must be a positive integer, got {v!r}")
    return v


def _model_input(graph: ir.Graph, spec: dict, rank: int, names: tuple[str, ...]) -> ir.Value:
    inputs = [v for v in graph.inputs if not v.is_initializer()]
    if spec.get("input") is not None:
        found = [v for v in inputs if v.name == spec["input"]]
        if not found:
            raise WebinferError(f"--preprocess: the model has no input {spec['input']!r}")
        return found[0]
    named = [v for v in inputs if v.name in names]
    ranked = [v for v in inputs if v.shape is not None and len(v.shape) == rank and v.dtype is not None
              and v.dtype.is_floating_point()]
    found = named or ranked
    if len(found) != 1:
        raise WebinferError(f"--preprocess: name the model's audio input with \"input\" (rank-{rank} float inputs: "
                            f"{[v.name for v in ranked]})")
    return found[0]


class _Nodes:
    """Appends prologue nodes in order; ``add(op, inputs, **attrs)`` -> the node's first output."""

    def __init__(self, graph: ir.Graph):
        self.graph, self.nodes = graph, []

    def const(self, array, hint: str) -> ir.Value:
        return new_initializer(self.graph, np.asarray(array), f"preprocess_{hint}")

    def add(self, op: str, inputs: list, domain: str = "", **attrs) -> ir.Value:
        made = [_attr(k, v) for k, v in sorted(attrs.items())]
        node = ir.Node(domain, op, inputs, attributes=made, name=f"preprocess_{op.lower()}_{len(self.nodes)}",
                       num_outputs=1)
        node.outputs[0].dtype = ir.DataType.FLOAT
        self.nodes.append(node)
        return node.outputs[0]


def _attr(name: str, v) -> ir.Attr:
    if isinstance(v, list):
        return ir.AttrInt64s(name, v)
    if isinstance(v, float):
        return ir.AttrFloat32(name, v)
    return ir.AttrString(name, v) if isinstance(v, str) else ir.AttrInt64(name, v)


def hertz_to_mel(f):
    """Slaney's mel scale (linear below 1 kHz, logarithmic above), as transformers' ``hertz_to_mel``."""
    f = np.asarray(f, np.float64)
    return np.where(f >= 1000.0, 15.0 + np.log(np.maximum(f, 1e-30) / 1000.0) * (27.0 / np.log(6.4)), 3.0 * f / 200.0)


def mel_to_hertz(m):
    m = np.asarray(m, np.float64)
    return np.where(m >= 15.0, 1000.0 * np.exp(np.log(6.4) / 27.0 * (m - 15.0)), 200.0 * m / 3.0)


def slaney_mel_filters(bins: int, mels: int, rate: int, low: float = 0.0, high: float = 8000.0) -> np.ndarray:
    """[bins, mels] triangles between mel-spaced frequencies, each scaled to unit area (norm="slaney")."""
    edges = mel_to_hertz(np.linspace(hertz_to_mel(low), hertz_to_mel(high), mels + 2))
    freqs = np.linspace(0, rate // 2, bins)
    slopes = edges[None, :] - freqs[:, None]
    diff = np.diff(edges)
    tri = np.maximum(0.0, np.minimum(-slopes[:, :-2] / diff[:-1], slopes[:, 2:] / diff[1:]))
    return tri * (2.0 / (edges[2:mels + 2] - edges[:mels]))[None, :]


def dft_basis(n_fft: int) -> np.ndarray:
    """[n_fft, 2 * (n_fft // 2 + 1)]: periodic Hann window times (cos | -sin) of the one-sided DFT."""
    n, k = np.arange(n_fft), np.arange(n_fft // 2 + 1)
    window = 0.5 - 0.5 * np.cos(2 * np.pi * n / n_fft)
    angle = 2 * np.pi * ((n[:, None] * k[None, :]) % n_fft) / n_fft
    return np.concatenate([window[:, None] * np.cos(angle), -window[:, None] * np.sin(angle)], axis=1)


def _log_mel(b: _Nodes, signal: ir.Value, spec: dict) -> tuple[ir.Value, dict]:
    """Whisper's features of a signal already at the model's rate and ``n_samples`` long: [mels, frames]."""
    mels = _int(spec, "feature_size", 80, alias="num_mel_bins")
    n_fft, hop, rate = _int(spec, "n_fft", 400), _int(spec, "hop_length", 160), _int(spec, "sampling_rate", 16000)
    n = _int(spec, "n_samples", _int(spec, "chunk_length", 30) * rate)
    frames = n // hop  # (1 + n // hop frames, the last one dropped as transformers does)
    if n_fft // 2 >= n or frames < 1:
        raise WebinferError(f"--preprocess: n_samples {n} is too short for n_fft {n_fft} and hop_length {hop}")
    x = b.add("Pad", [signal, b.const(np.array([n_fft // 2, n_fft // 2], np.int64), "centre")], mode="reflect")
    parts = -(-n_fft // hop)  # a frame is `parts` consecutive rows of `hop` samples, the last one cut
    rows = frames - 1 + parts
    padded = n + 2 * (n_fft // 2)
    if rows * hop > padded:
        x = b.add("Pad", [x, b.const(np.array([0, rows * hop - padded], np.int64), "rows")])
    elif rows * hop < padded:
        x = b.add("Slice", [x, b.const(np.array([0], np.int64), "zero"), b.const(np.array([rows * hop], np.int64),
                                                                                  "end")])
    x = b.add("Reshape", [x, b.const(np.array([rows, hop], np.int64), "rows_shape")])
    pieces = []
    for i in range(parts):
        width = min(hop, n_fft - i * hop)
        pieces.append(b.add("Slice", [x, b.const(np.array([i, 0], np.int64), "start"),
                                      b.const(np.array([i + frames, width], np.int64), "stop")]))
    x = b.add("Concat", pieces, axis=1) if parts > 1 else pieces[0]  # [frames, n_fft]
    y = b.add("MatMul", [x, b.const(dft_basis(n_fft).astype(np.float32), "dft")])
    y = b.add("Mul", [y, y])
    bank = slaney_mel_filters(n_fft // 2 + 1, mels, rate)
    z = b.add("MatMul", [y, b.const(np.concatenate([bank, bank]).astype(np.float32), "mel")])  # [frames, mels]
    z = b.add("Max", [z, b.const(np.float32(1e-10), "floor")])
    z = b.add("Mul", [b.add("Log", [z]), b.const(np.float32(1 / np.log(10)), "log10")])
    top = b.add("Sub", [b.add("ReduceMax", [z], keepdims=1), b.const(np.float32(8.0), "range")])
    z = b.add("Mul", [b.add("Add", [b.add("Max", [z, top]), b.const(np.float32(4.0), "shift")]),
                      b.const(np.float32(0.25), "scale")])
    z = b.add("Transpose", [z], perm=[1, 0])
    info = {"features": "log_mel", "mel_bins": mels, "n_fft": n_fft, "hop_length": hop, "n_samples": n}
    return z, info


def _waveform(b: _Nodes, signal: ir.Value, spec: dict) -> tuple[ir.Value, dict]:
    """The signal, zero-mean unit-variance when ``do_normalize`` (Wav2Vec2FeatureExtractor's 1e-7 in the root)."""
    normalize = spec.get("do_normalize", True)
    if not isinstance(normalize, bool):
        raise WebinferError("--preprocess: do_normalize must be true or false")
    if normalize:
        centred = b.add("Sub", [signal, b.add("ReduceMean", [signal], keepdims=1)])
        var = b.add("ReduceMean", [b.add("Mul", [centred, centred])], keepdims=1)
        signal = b.add("Div", [centred, b.add("Sqrt", [b.add("Add", [var, b.const(np.float32(1e-7), "eps")])])])
    return signal, {"features": "waveform", "normalize": normalize}


def add_audio_prologue(model: ir.Model, spec) -> dict:
    """Replace the model's audio input by the PCM input ``audio`` [channels, samples] and the prologue (see the
    module's docstring); returns the manifest's ``audio`` entry (runtime/audio.py reads it)."""
    spec, _ = read_spec(spec, "preprocess", AUDIO_KEYS)
    kind = spec.get("feature_extractor_type")
    if kind not in EXTRACTORS:
        raise WebinferError(f"--preprocess: feature_extractor_type {kind!r} (choose from {', '.join(EXTRACTORS)})")
    if spec.get("dither", 0.0) not in (0, 0.0):
        raise WebinferError("--preprocess: dither adds random noise to the features; only dither 0 is supported")
    whisper = kind == "WhisperFeatureExtractor"
    if whisper and spec.get("do_normalize", False):
        raise WebinferError("--preprocess: do_normalize for Whisper features is not supported")
    graph = model.graph
    x = _model_input(graph, spec, 3 if whisper else 2, ("input_features",) if whisper else ("input_values",))
    name = spec.get("name", "audio")
    if not isinstance(name, str) or any(v.name == name for v in graph.inputs):
        raise WebinferError(f"--preprocess: the model already has an input named {name!r} (pick another \"name\")")
    rate = _int(spec, "sampling_rate", 16000)
    audio = ir.Value(name=name, type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([f"{name}_channels",
                                                                                         f"{name}_samples"]))
    b = _Nodes(graph)
    if model.opset_imports.get("", model.opset_imports.get("ai.onnx", 13)) >= 18:
        mono = b.add("ReduceMean", [audio, b.const(np.array([0], np.int64), "channels")], keepdims=0)
    else:  # (axes an attribute before opset 18)
        mono = b.add("ReduceMean", [audio], axes=[0], keepdims=0)
    length = _int(spec, "n_samples", _int(spec, "chunk_length", 30) * rate) if whisper else 0
    signal = b.add("Resample", [mono], domain=DOMAIN, rate_dim=f"{name}_rate", out_rate=rate, length=length)
    out, info = (_log_mel if whisper else _waveform)(b, signal, spec)
    out = b.add("Unsqueeze", [out, b.const(np.array([0], np.int64), "batch")])
    shape = [1, info["mel_bins"], info["n_samples"] // info["hop_length"]] if whisper else [1, None]
    for want, got in zip(x.shape or [], shape):
        if isinstance(want, int) and got is not None and want != got:
            raise WebinferError(f"--preprocess: input {x.name!r} is {list(x.shape)}, the {kind} gives {shape}")
    if x.shape is not None and len(x.shape) != len(shape):
        raise WebinferError(f"--preprocess: input {x.name!r} is {list(x.shape)}, the {kind} gives rank {len(shape)}")
    mask = None if whisper else next((v for v in graph.inputs if v.name == "attention_mask" and v.shape is not None
                                      and len(v.shape) == 2 and not v.is_initializer()), None)
    if mask is not None:  # (every sample is real: the mask is ones of the waveform's shape)
        shape_of = b.add("Shape", [out])
        shape_of.dtype = ir.DataType.INT64
        mask_node = ir.Node("", "ConstantOfShape", [shape_of], num_outputs=1, name="preprocess_mask",
                            attributes=[ir.AttrTensor("value", ir.tensor(np.ones(1, mask.dtype.numpy())))])
        b.nodes.append(mask_node)
    if x.dtype != ir.DataType.FLOAT:
        out = b.add("Cast", [out], to=x.dtype.value)
    out.dtype, out.shape = x.dtype, ir.Shape([ir.SymbolicDim(None) if d is None else d for d in shape])
    graph.insert_before(next(iter(graph)), b.nodes)
    x.replace_all_uses_with(out)
    graph.inputs[graph.inputs.index(x)] = audio
    if mask is not None:
        mask_node.outputs[0].dtype, mask_node.outputs[0].shape = mask.dtype, ir.Shape([1, ir.SymbolicDim(None)])
        mask.replace_all_uses_with(mask_node.outputs[0])
        graph.inputs.remove(mask)
    model.opset_imports.setdefault(DOMAIN, 1)
    return {"audio": name, "input": x.name, "rate": "sample_rate", "rate_dim": f"{name}_rate",
            "sampling_rate": rate, "extractor": kind, **info}
