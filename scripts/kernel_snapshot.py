"""Record or compare what a set of real models build to: every WGSL file, the weight shards and the manifest.

A refactor of the graph passes or the code generator must leave the artifacts of real models unchanged.
``record`` builds each model (the demo artifacts' sources and options, read from their ``.key`` stamps, plus
models from the caches) and writes one sha256 per file; ``compare`` reports every file that differs
between two such records. The manifest is compared without the pass report's timings; ``--run`` also runs
each artifact natively once on seeded random feeds and records a digest of its outputs.

    PYTHONPATH=<tree> python scripts/kernel_snapshot.py record OUT.json [--keys DIR] [--only a,b] [--run]
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


SIZES = (8, 256, 4000)  # symbolic dims of the random feeds, tried in turn


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


def _feeds(session, size: int, seed: int = 0) -> dict:
    """Random feeds for the artifact's inputs: symbolic dims at ``size``, integers 0 or 1 (ids, types,
    masks), floats normal."""
    import numpy as np

    rng = np.random.default_rng(seed)
    feeds = {}
    for io in session.get_inputs():
        shape = [d if isinstance(d, int) else size for d in io.shape]
        dtype = np.dtype(io.dtype if io.dtype != "bool" else np.bool_)
        if dtype.kind == "f":
            feeds[io.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind in "iu":
            feeds[io.name] = rng.integers(0, 2, shape).astype(dtype)
        else:
            feeds[io.name] = np.ones(shape, dtype)
    return feeds


def outputs_digest(artifact: Path) -> str:
    """sha256 of every output of one native run on random feeds (bit-exact), or why it did not run."""
    try:
        from webinfer.runtime.inference import InferenceSession

        session = InferenceSession(str(artifact))
        names = [o.name for o in session.get_outputs()]
        manifest = json.loads((artifact / "manifest.json").read_text())
        carried = {d for io in session.get_inputs() for d in io.shape if not isinstance(d, int)}
        unbound = {d: 0 for d in manifest.get("dims", []) if d not in carried}  # (a KV cache's past: empty)
        for size in SIZES:  # (the first size the artifact accepts: a model may need a minimum length)
            try:
                got = session.run(names, _feeds(session, size), dims=unbound or None)
                break
            except Exception:
                if size == SIZES[-1]:
                    raise
        h = hashlib.sha256()
        for arr in got:
            h.update(str(arr.dtype).encode() + str(arr.shape).encode() + arr.tobytes())
        return h.hexdigest()
    except Exception as e:  # (an artifact that needs more than plain feeds: a KV cache's dims)
        return f"not run: {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"


def record(out: Path, keys: Path, only: list[str] | None, run: bool = False) -> None:
    from webinfer.build import build

    got = json.loads(out.read_text()) if out.is_file() else {}
    for name, (source, options) in sources(keys).items():
        if only and name not in only:
            continue
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            build(str(source), str(Path(tmp) / f"{name}.wi"), **options)
            got[name] = digest(Path(tmp) / f"{name}.wi")
            if run:
                got[name]["outputs of a native run"] = outputs_digest(Path(tmp) / f"{name}.wi")
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
        ran = a.get("outputs of a native run", "not recorded")
        ran = "outputs not compared" if ran.startswith("not ") else "outputs equal" if "outputs of a native run" not in diff \
            else "outputs differ"
        print(f"{name}: {n} WGSL files, {len(a)} files, {'identical' if not diff else f'{len(diff)} differ: {diff[:5]}'}"
              f", {ran}")
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
    r.add_argument("--run", action="store_true", help="also run each artifact natively once and record its outputs")
    c = sub.add_parser("compare")
    c.add_argument("old", type=Path)
    c.add_argument("new", type=Path)
    a = p.parse_args(argv)
    if a.cmd == "record":
        record(a.out, a.keys, [s for s in a.only.split(",") if s] or None, a.run)
        return 0
    return compare(json.loads(a.old.read_text()), json.loads(a.new.read_text()))


if __name__ == "__main__":
    sys.exit(main())
