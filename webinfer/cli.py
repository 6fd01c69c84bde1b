"""Command line: argument parsing only; the work is in build.py, runtime/ and inspect.py.

Every user error is one line on stderr and a non-zero exit, never a traceback
(set WEBINFER_DEBUG=1 to see one).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from .errors import WebinferError


def _parse_dims(items) -> dict:
    dims = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not value.strip().isdigit():
            raise WebinferError(f"--dim expects name=integer, got {item!r}")
        dims[name] = int(value)
    return dims


def cmd_build(args) -> int:
    from .build import build

    out = args.output or os.path.splitext(os.path.basename(args.model))[0] + ".wi"
    if os.path.exists(out) and not os.path.isdir(out):
        raise WebinferError(f"{out} exists and is not a directory")
    t0 = time.perf_counter()
    manifest = build(args.model, out, dims=_parse_dims(args.dim), target=args.target, progress=True,
                     optimize=not args.no_optimize, save_optimized=args.save_optimized)
    weight_bytes = sum(s["bytes"] for s in manifest["shards"])
    print(f"built {out}: {len(manifest['steps'])} kernels ({len(manifest['shaders'])} distinct shaders), "
          f"{weight_bytes / 2**20:.1f} MiB weights in {len(manifest['shards'])} shard(s), "
          f"{time.perf_counter() - t0:.1f} s")
    if args.report:
        import json

        from .report import build_report, report_table

        report = build_report(manifest, _parse_dims(args.dim))
        with open(args.report, "w") as f:
            json.dump(report, f, indent=1)
        print(report_table(report))
        print(f"wrote {args.report}")
    if args.web:
        _bundle(out, args.web, args.demo, args.web_file)
    return 0


def _bundle(artifact: str, site: str, demo, files) -> None:
    from .bundle import bundle

    page = bundle(artifact, site, demo=demo, files=files)
    print(f"wrote {page}; serve the site with: webinfer serve {site}")


def cmd_bundle(args) -> int:
    _bundle(args.artifact, args.output, args.demo, args.file)
    return 0


def _load_feed(spec: str):
    import numpy as np

    name, sep, path = spec.partition("=")
    if not sep:
        raise WebinferError(f"--input expects name=file.npy, got {spec!r}")
    if not os.path.isfile(path):
        raise WebinferError(f"--input {name}: no such file {path!r}")
    try:
        return name, np.load(path, allow_pickle=False)
    except Exception as e:
        raise WebinferError(f"--input {name}: {path} is not a .npy array ({type(e).__name__})") from None


def cmd_run(args) -> int:
    import numpy as np

    from .runtime.inference import InferenceSession

    session = InferenceSession(args.artifact)
    feeds = dict(_load_feed(s) for s in args.input or [])
    t0 = time.perf_counter()
    names = [o.name for o in session.get_outputs()]
    outputs = session.run(names, feeds)
    ms = (time.perf_counter() - t0) * 1e3
    for name, value in zip(names, outputs):
        flat = value.reshape(-1)
        head = ", ".join(f"{v:.6g}" if value.dtype.kind == "f" else str(v) for v in flat[:6])
        print(f"{name}: {value.dtype} {list(value.shape)} [{head}{', ...' if flat.size > 6 else ''}]")
    print(f"ran in {ms:.1f} ms on {session.device.adapter_name}")
    if args.output:
        np.savez(args.output, **dict(zip(names, outputs)))
        print(f"wrote {args.output}")
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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="webinfer", description="Compile ONNX models to WebGPU and run them.")
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="compile model.onnx into an artifact directory")
    b.add_argument("model")
    b.add_argument("-o", "--output", help="artifact directory (default: <model>.wi)")
    b.add_argument("--dim", action="append", metavar="NAME=VALUE", help="fix a symbolic dim at build time")
    b.add_argument("--target", choices=["webgpu", "native"], default="webgpu",
                   help="limits to build for: WebGPU defaults (browsers) or larger native limits")
    b.add_argument("--no-optimize", action="store_true", help="skip the graph passes (fold, cancel, fuse)")
    b.add_argument("--save-optimized", metavar="PATH", help="also write the optimized graph as ONNX")
    b.add_argument("--report", metavar="REPORT.json",
                   help="write nodes, kernels, planned/naive activation bytes, weight bytes and passes")
    b.add_argument("--web", metavar="SITE", help="also write a static site that runs it in the browser")
    b.add_argument("--demo", help="with --web: the page to use (classify, similarity, chat; default: a generic one)")
    b.add_argument("--web-file", action="append", metavar="FILE", help="with --web: copy FILE beside the page")
    b.set_defaults(fn=cmd_build)
    w = sub.add_parser("bundle", help="write a static site (Pyodide + WebGPU) that runs an artifact")
    w.add_argument("artifact")
    w.add_argument("-o", "--output", required=True, metavar="SITE", help="site directory (pages are added)")
    w.add_argument("--demo", help="page: classify, similarity, chat (default: a generic page)")
    w.add_argument("--file", action="append", metavar="FILE", help="copy FILE beside the page (e.g. a tokenizer)")
    w.set_defaults(fn=cmd_bundle)
    r = sub.add_parser("run", help="run an artifact natively")
    r.add_argument("artifact")
    r.add_argument("--input", action="append", metavar="NAME=FILE.npy")
    r.add_argument("--output", metavar="OUT.npz")
    r.set_defaults(fn=cmd_run)
    i = sub.add_parser("inspect", help="describe a model.onnx or an artifact")
    i.add_argument("path")
    i.add_argument("--dim", action="append", metavar="NAME=VALUE", help="evaluate symbolic dims at this value")
    i.set_defaults(fn=cmd_inspect)
    s = sub.add_parser("serve", help="serve a static site on 127.0.0.1")
    s.add_argument("directory")
    s.add_argument("--port", type=int, default=8000)
    s.set_defaults(fn=cmd_serve)
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
