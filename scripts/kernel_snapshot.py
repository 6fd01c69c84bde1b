"""Record or compare what a set of real models build to: every WGSL file, the weight shards and the manifest.

A refactor of the graph passes or the code generator must leave the artifacts of real models unchanged.
``record`` builds each model (the demo artifacts' sources and options, read from their ``.key`` stamps, plus
models from the caches) and writes one sha256 per file; ``compare`` reports every file that differs
between two such records. The manifest is compared without the pass report's timings.

    PYTHONPATH=<tree> python scripts/kernel_snapshot.py record OUT.json [--keys DIR] [--only a,b]
    python scripts/kernel_snapshot.py compare OLD.json NEW.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

CACHE = Path.home() / ".cache" / "webinfer"
# Real models beyond the demos, each exercising other fusions: GPT-2 (tanh GELU, LayerNorm, attention),
# a Llama (RMSNorm, SiLU, attention, paired MLP matmuls), CNNs with BatchNorm (conv_bn, epilogues),
# an LSTM/VAD model and a CRNN.
EXTRA = {
    "gpt2": (CACHE / "models/family-gpt2-gpt2-1933cc60e8/model.onnx", {}),
    "tiny-llama": (CACHE / "models/tiny-llama-test-5a16b2627e/model.onnx", {"max_seq": 64}),
    "ppocr-cls": (CACHE / "zoo/models/ppocr-cls-v2.onnx", {}),
    "mtcnn-onet": (CACHE / "zoo/models/mtcnn-onet.onnx", {}),
    "dnsmos": (CACHE / "zoo/models/dnsmos-sig-bak-ovr.onnx", {}),
    "ddddocr-common": (CACHE / "zoo/models/ddddocr-common.onnx", {}),
    "smart-turn": (CACHE / "zoo/models/smart-turn-v3.2.onnx", {}),
    "silero-vad": (CACHE / "zoo/models/silero-vad-v5.onnx", {}),
}


def sources(keys: Path) -> dict[str, tuple[Path, dict]]:
    """The demo artifacts' (source, options) from their stamps (without the CPU model: it holds no WGSL)."""
    out = {}
    for stamp in sorted(keys.glob("*.key")):
        key = json.loads(stamp.read_text())
        out[stamp.stem] = (Path(key["source"]), {**key["options"], "cpu": False})
    return {**out, **EXTRA}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _scrub(obj):
    """The manifest without wall-clock figures (pass timings)."""
    if isinstance(obj, dict):
        return {k: _scrub(v) for k, v in obj.items() if k not in ("seconds", "built_at", "build_seconds")}
    if isinstance(obj, list):
        return [_scrub(v) for v in obj]
    return obj


def digest(artifact: Path) -> dict[str, str]:
    files = {}
    for f in sorted(artifact.rglob("*")):
        if f.is_file() and f.name not in ("manifest.json", "manifest.sha256"):
            files[str(f.relative_to(artifact))] = _sha(f)
    manifest = _scrub(json.loads((artifact / "manifest.json").read_text()))
    files["manifest.json (timings removed)"] = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()
    return files


def record(out: Path, keys: Path, only: list[str] | None) -> None:
    from webinfer.build import build

    got = json.loads(out.read_text()) if out.is_file() else {}
    for name, (source, options) in sources(keys).items():
        if only and name not in only:
            continue
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            build(str(source), str(Path(tmp) / f"{name}.wi"), **options)
            got[name] = digest(Path(tmp) / f"{name}.wi")
        wgsl = sum(k.endswith(".wgsl") for k in got[name])
        print(f"{name}: {wgsl} WGSL files, {len(got[name])} files in {time.perf_counter() - t0:.1f} s", flush=True)
        out.write_text(json.dumps(got, indent=1, sort_keys=True))


def compare(old: dict, new: dict) -> int:
    bad = wgsl = 0
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a is None or b is None:
            print(f"{name}: only in {'new' if a is None else 'old'}")
            bad += 1
            continue
        diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        n = sum(k.endswith(".wgsl") for k in a)
        wgsl += n
        print(f"{name}: {n} WGSL files, {len(a)} files, {'identical' if not diff else f'{len(diff)} differ: {diff[:5]}'}")
        bad += bool(diff)
    print(f"{len(set(old) & set(new))} models, {wgsl} WGSL files compared, {bad} model(s) differ")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("out", type=Path)
    r.add_argument("--keys", type=Path, default=Path("build/artifacts"))
    r.add_argument("--only", default="")
    c = sub.add_parser("compare")
    c.add_argument("old", type=Path)
    c.add_argument("new", type=Path)
    a = p.parse_args(argv)
    if a.cmd == "record":
        record(a.out, a.keys, [s for s in a.only.split(",") if s] or None)
        return 0
    return compare(json.loads(a.old.read_text()), json.loads(a.new.read_text()))


if __name__ == "__main__":
    sys.exit(main())
