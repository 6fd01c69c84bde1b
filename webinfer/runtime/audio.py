"""PCM in: the run-time side of an artifact built with the audio prologue (graph/audio_prologue.py). Standard
library only: the same code runs natively and in a page (Pyodide).

The prologue's input is float32 [channels, samples] (mono: [1, samples]) and its sample rate is a dim (manifest ``audio.rate_dim``) bound per run: ``InferenceSession.run(None, {"audio": pcm,
"sample_rate": 44100})`` works, ``audio_feed`` packs PCM given as floats or int16, ``read_wav`` reads a WAV file.
Only the sample format and layout are adapted here (int to float, interleaved frames to one row per channel); the
channel mix, the resampling and the features run on the GPU.
"""

from __future__ import annotations

import struct
import sys
from array import array

from ..errors import WebinferError
from ..format.schema import Manifest
from .tensor import HostTensor

_SCALE = {1: 1 / 128, 2: 1 / 32768, 3: 1 / 8388608, 4: 1 / 2147483648}  # int PCM -> [-1, 1)


def _floats(values, scale: float = 1.0) -> bytes:
    """float32 bytes of an iterable of numbers, times ``scale``."""
    out = array("f", values if scale == 1.0 else (v * scale for v in values))
    if sys.byteorder != "little":
        out.byteswap()
    return out.tobytes()


def _planar(data: bytes, channels: int) -> bytes:
    """Interleaved float32 frames -> one row per channel (a strided copy: array slicing, no per-sample Python)."""
    if channels == 1:
        return data
    frames = array("f", data)
    return b"".join(frames[c::channels].tobytes() for c in range(channels))


def audio_feed(pcm, channels: int = 1, dtype: str | None = None) -> HostTensor:
    """PCM as the prologue's input, float32 [channels, samples]. ``pcm``: a numpy array (float32/float64 in
    [-1, 1], or int16) of [samples], or 2-D with the shorter axis as the channels ([samples, channels] as
    soundfile/scipy give it, or [channels, samples] as torchaudio does); an ``array.array`` ('f', 'd' or 'h'), a
    list of floats, or bytes-like of float32 (``dtype="int16"``: int16) samples, interleaved when ``channels`` >
    1; a HostTensor float32 [samples] or [channels, samples]."""
    if isinstance(pcm, HostTensor):
        if pcm.dtype == "float32" and len(pcm.shape) == 2:
            return pcm
        if pcm.dtype == "float32" and len(pcm.shape) == 1:
            return HostTensor("float32", [1, pcm.shape[0]], pcm.data)
        raise WebinferError(f"audio: expected float32 [samples] or [channels, samples], got {pcm}")
    if hasattr(pcm, "shape") and hasattr(pcm, "tobytes"):  # numpy, without importing it
        shape, kind = tuple(pcm.shape), str(pcm.dtype)
        if len(shape) not in (1, 2) or kind not in ("float32", "float64", "int16"):
            raise WebinferError(f"audio: expected float32, float64 or int16 samples [samples] or [samples, "
                                f"channels], got {kind} {list(shape)}")
        if len(shape) == 2 and shape[0] > shape[1]:  # [samples, channels]: one row per channel
            pcm = pcm.T
        channels = pcm.shape[0] if len(shape) == 2 else 1
        if kind == "float32" and sys.byteorder == "little":
            data = pcm.tobytes(order="C")
        else:
            data = _floats(array("h" if kind == "int16" else "d", pcm.tobytes(order="C")),
                           _SCALE[2] if kind == "int16" else 1.0)
        interleaved = False
    else:
        interleaved = True
        if isinstance(pcm, array):
            if pcm.typecode not in ("f", "d", "h"):
                raise WebinferError(f"audio: array.array of type {pcm.typecode!r} (use 'f', 'd' or 'h')")
            data = pcm.tobytes() if pcm.typecode == "f" else _floats(pcm, _SCALE[2] if pcm.typecode == "h" else 1.0)
        elif isinstance(pcm, (list, tuple)):
            try:
                data = _floats(pcm)
            except TypeError:
                raise WebinferError("audio: a list of PCM samples must hold numbers") from None
        elif isinstance(pcm, (bytes, bytearray, memoryview)):
            if dtype not in (None, "float32", "int16"):
                raise WebinferError(f"audio: raw PCM bytes are float32 or int16, not {dtype!r}")
            size = 2 if dtype == "int16" else 4
            if len(pcm) % size:
                raise WebinferError(f"audio: {len(pcm)} bytes are not whole {dtype or 'float32'} samples")
            data = bytes(pcm) if size == 4 else _floats(array("h", bytes(pcm)), _SCALE[2])
        else:
            raise WebinferError(f"audio: cannot take PCM from a {type(pcm).__name__}")
    if not isinstance(channels, int) or channels < 1:
        raise WebinferError(f"audio: channels must be a positive integer, got {channels!r}")
    samples = len(data) // 4
    if samples == 0 or samples % channels:
        raise WebinferError(f"audio: {samples} samples are not whole frames of {channels} channels"
                            if samples else "audio: no samples")
    return HostTensor("float32", [channels, samples // channels], _planar(data, channels) if interleaved else data)


def read_wav(source) -> tuple[HostTensor, int]:
    """A WAV file (a path, bytes or a binary file) -> (float32 [channels, samples], sample rate): 8-, 16-, 24- and
    32-bit integer PCM and 32-/64-bit float, plain or WAVE_FORMAT_EXTENSIBLE (what sox writes for 24 bits or more
    than 2 channels; Python 3.11's ``wave`` refuses it, so the RIFF chunks are read here). Anything else, or a
    corrupt file, is refused in one line."""
    what = source if isinstance(source, str) else "WAV data"
    if isinstance(source, (bytes, bytearray, memoryview)):
        raw = bytes(source)
    elif hasattr(source, "read"):
        raw = source.read()
    else:
        try:
            with open(source, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            raise WebinferError(f"{what}: no such file") from None
    fmt, data = _chunks(raw, what)
    tag, channels, rate, _, _, bits = struct.unpack_from("<HHIIHH", fmt)
    if tag == 0xFFFE and len(fmt) >= 26:  # WAVE_FORMAT_EXTENSIBLE: the format is the sub-format GUID's first word
        tag = struct.unpack_from("<H", fmt, 24)[0]
    kind = {(1, 8): "B", (1, 16): "h", (1, 24): "i", (1, 32): "i", (3, 32): "f", (3, 64): "d"}.get((tag, bits))
    if kind is None or channels < 1 or rate < 1:
        raise WebinferError(f"{what}: unsupported WAV (format {tag}, {bits}-bit, {channels} channels, {rate} Hz; "
                            f"integer PCM of 8-32 bits or float of 32/64 bits)")
    width = bits // 8
    count = len(data) // (width * channels)
    if count == 0:
        raise WebinferError(f"{what}: the WAV file holds no samples")
    data = data[: count * width * channels]
    if width == 3:  # little-endian 24-bit: widened to 32 by a zero low byte
        data = b"".join(b"\0" + data[i:i + 3] for i in range(0, len(data), 3))
    values = array(kind, data)
    if sys.byteorder != "little" and width > 1:
        values.byteswap()
    if kind == "B":  # unsigned bytes centred on 128
        values = array("h", (v - 128 for v in values))
    scale = 1.0 if tag == 3 else _SCALE[width if width != 3 else 4]
    return HostTensor("float32", [channels, count], _planar(_floats(values, scale), channels)), rate


def _chunks(raw: bytes, what: str) -> tuple[bytes, bytes]:
    """(fmt chunk, data chunk) of a RIFF/WAVE file."""
    if len(raw) < 12 or raw[:4] != b"RIFF" or raw[8:12] != b"WAVE":
        raise WebinferError(f"{what}: not a WAV file (no RIFF/WAVE header)")
    pos, fmt, data = 12, None, None
    while pos + 8 <= len(raw) and data is None:
        cid, size = raw[pos:pos + 4], struct.unpack_from("<I", raw, pos + 4)[0]
        body = raw[pos + 8:pos + 8 + size]
        if cid == b"data":
            if size not in (0, 0xFFFFFFFF) and len(body) < size:  # (0 / ~0: a streaming writer's unknown size)
                raise WebinferError(f"{what}: truncated WAV file (data chunk of {size} bytes, {len(body)} present)")
            data = body if size not in (0, 0xFFFFFFFF) else raw[pos + 8:]
        elif cid == b"fmt ":
            fmt = body
        pos += 8 + size + (size & 1)
    if fmt is None or len(fmt) < 16:
        raise WebinferError(f"{what}: corrupt WAV file (no format chunk before the data)")
    if data is None:
        raise WebinferError(f"{what}: corrupt WAV file (no data chunk)")
    return fmt, data


def pack_audio(spec: Manifest, feeds: dict, dims: dict | None) -> tuple[dict, dict | None]:
    """An artifact with an audio prologue: the PCM feed packed (``audio_feed``) and its sample rate, given as
    the feed ``sample_rate`` (or ``(pcm, rate)`` as the audio feed), moved to the rate dim."""
    info = spec.audio
    if info is None or info.audio not in feeds:
        return feeds, dims
    feeds = dict(feeds)
    value, rate = feeds[info.audio], feeds.pop(info.rate, None)
    if isinstance(value, tuple) and len(value) == 2:
        value, rate = value
    if rate is None and info.rate_dim not in (dims or {}):
        raise WebinferError(f"audio: give the sample rate of {info.audio!r} (the feed {info.rate!r}, e.g. "
                            f"{info.sampling_rate})")
    if rate is not None:
        if isinstance(rate, float) and rate.is_integer():
            rate = int(rate)
        elif hasattr(rate, "__index__") and not isinstance(rate, bool):  # (a numpy integer)
            rate = rate.__index__()
        if not isinstance(rate, int) or isinstance(rate, bool) or rate < 1:
            raise WebinferError(f"audio: the sample rate must be a positive integer (Hz), got {rate!r}")
        dims = dict(dims or {}, **{info.rate_dim: rate})
    feeds[info.audio] = audio_feed(value)
    return feeds, dims
