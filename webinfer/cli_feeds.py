"""``webinfer run --input NAME=FILE``: a .npy array, or the file a user has for an artifact with a prologue: an
image (PNG, JPEG, ...) for the image input of one built with --preprocess IMAGE.json, a WAV file (any rate) for
the audio input of one with the audio front end. Anything else is refused in one line that says what the input
takes."""

from __future__ import annotations

import os

from .errors import WebinferError

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")


def parse_inputs(specs) -> dict:
    """``--input`` flags -> {name: path}, checked before a session opens."""
    out = {}
    for spec in specs or []:
        name, sep, path = spec.partition("=")
        if not sep or not name:
            raise WebinferError(f"--input expects NAME=FILE (.npy, an image or a WAV file), got {spec!r}")
        if name in out:
            raise WebinferError(f"--input {name} is given twice")
        if not os.path.isfile(path):
            raise WebinferError(f"--input {name}: {'a folder, not a file' if os.path.isdir(path) else 'no such file'}"
                                f" {path!r}")
        out[name] = path
    return out


def load_feeds(paths: dict, spec) -> dict:
    """{name: path} -> feeds for InferenceSession.run; ``spec``: the artifact's manifest (its prologues)."""
    missing = [io.name for io in spec.inputs if io.name not in paths] if spec is not None else []
    kind = _kind(spec) if missing else None
    if kind:
        raise WebinferError(f"missing feed for input {missing[0]!r}: this artifact is {kind[0]}, which "
                            f"`webinfer {kind[1]}` runs")
    image = spec.preprocess.image if spec is not None and spec.preprocess is not None else None
    audio = spec.audio.audio if spec is not None and spec.audio is not None else None
    return {name: _load(name, path, image, audio) for name, path in paths.items()}


def _load(name: str, path: str, image: str | None, audio: str | None):
    import numpy as np

    ext = os.path.splitext(path)[1].lower()
    if ext in IMAGE_EXTENSIONS:
        if name != image:
            raise WebinferError(f"--input {name}: an image file feeds only the image input of an artifact built with "
                                f"--preprocess IMAGE.json ({'its image input is ' + repr(image) if image else 'this one has none'}"
                                "); pass the tensor as a .npy file")
        from .tasks.classification import read_image_rgba

        data, width, height = read_image_rgba(path)
        return np.frombuffer(data, np.uint8).reshape(height, width, 4)  # (runtime/vision.py packs it)
    if ext == ".wav":
        if name != audio:
            raise WebinferError(f"--input {name}: a WAV file feeds only the audio input of an artifact built with the "
                                f"audio front end ({'its audio input is ' + repr(audio) if audio else 'this one has none'}"
                                "; --preprocess audio); pass the tensor as a .npy file")
        from .runtime.audio import read_wav

        return read_wav(path)  # (pcm, rate): runtime/audio.py moves the rate to its dim
    try:
        return np.load(path, allow_pickle=False)
    except Exception as e:
        raise WebinferError(f"--input {name}: {path} is not a .npy array ({type(e).__name__}; an image or a WAV "
                            "file is read by its extension)") from None


def _kind(spec) -> tuple[str, str] | None:
    """(what a generation or encoder-decoder artifact is, the command for it): run feeds one step of its loop."""
    if spec.seq2seq is not None:
        return "an encoder-decoder (its loop feeds the decoder)", "transcribe ART CLIP.wav / translate ART TEXT"
    if any(io.name == "sampling_params" for io in spec.inputs) and spec.states:
        return "a decoder built for generation (its loop feeds the KV cache)", "generate ART --prompt TEXT"
    return None
