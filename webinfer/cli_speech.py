"""``webinfer transcribe`` and ``webinfer translate``: encoder-decoder artifacts (graph/seq2seq.py) from the
command line. Argument parsing here; the work is in tasks/asr.py, tasks/translation.py and llm/seq2seq.py."""

from __future__ import annotations

import json
import os
import time

from . import cli_args as A
from .errors import WebinferError


def register(sub) -> None:
    t = sub.add_parser("transcribe", help="speech to text with an artifact built from an encoder-decoder export "
                                          "folder (Whisper-style)")
    t.add_argument("artifact")
    t.add_argument("audio", nargs="?", help="a PCM WAV file")
    t.add_argument("--features", metavar="FILE.npy", help="the encoder's input (log-mel features [1, mels, "
                   "frames], as the model's feature extractor makes them) instead of audio")
    _options(t)
    t.set_defaults(fn=cmd_transcribe)
    r = sub.add_parser("translate", help="text to text with an artifact built from an encoder-decoder export folder "
                                         "(Marian, T5-style)")
    r.add_argument("artifact")
    r.add_argument("text")
    _options(r)
    r.set_defaults(fn=cmd_translate)


def _options(p) -> None:
    p.add_argument("--max-new-tokens", type=A.positive_int,
                   help="at most this many tokens (default: 64, or fewer where the decoder has fewer positions)")
    p.add_argument("--temperature", type=A.finite_float, default=0.0, help="0 (the default) is greedy")
    p.add_argument("--seed", type=A.seed, default=0, help=f"0..{A.SEED_MAX}")
    p.add_argument("--json", action="store_true", help="print one JSON object (text, token ids, timings)")


def _opts(args) -> dict:
    """(Without --max-new-tokens the generator's default: 64, or fewer where the decoder has fewer positions.)"""
    n = {} if args.max_new_tokens is None else {"max_new_tokens": args.max_new_tokens}
    return {**n, "temperature": args.temperature, "seed": args.seed}


def _read_features(path: str):
    import numpy as np

    if not os.path.isfile(path):
        raise WebinferError(f"--features {path}: no such file")
    try:
        value = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as e:
        raise WebinferError(f"--features {path}: not a .npy array ({str(e)[:80]})") from None
    if value.dtype != np.float32:
        raise WebinferError(f"--features {path}: expected float32, got {value.dtype}")
    return np.ascontiguousarray(value)


def cmd_transcribe(args) -> int:
    from .tasks.asr import SpeechRecognition, read_wav

    if args.audio is None and args.features is None:
        raise WebinferError("give an audio file or --features FILE.npy")
    audio = read_wav(args.audio) if args.audio is not None else None  # (errors before the GPU starts)
    features = _read_features(args.features) if args.features else None
    asr = SpeechRecognition(args.artifact)
    t0 = time.perf_counter()
    result = asr(audio, features=features, **_opts(args))
    _print(result, "text", asr.generator.stats, time.perf_counter() - t0, args.json)
    return 0


def cmd_translate(args) -> int:
    from .tasks.translation import Translation

    tr = Translation(args.artifact)
    t0 = time.perf_counter()
    result = tr(args.text, **_opts(args))
    _print(result, "translation_text", tr.generator.stats, time.perf_counter() - t0, args.json)
    return 0


def _print(result: dict, key: str, stats: dict, seconds: float, as_json: bool) -> None:
    if as_json:
        print(json.dumps({**result, "prompt_ids": stats["prompt_ids"], "source_length": stats["source_length"],
                          "seconds": round(seconds, 3)}, ensure_ascii=False))
    else:
        print(result[key])
