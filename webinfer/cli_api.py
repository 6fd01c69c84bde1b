"""CLI flags of the OpenAI-shaped API: ``webinfer serve ART --api [--embeddings ART]`` and ``webinfer build
MODEL --sentence-embedding [MODE]`` (kept out of cli.py, which only calls these)."""

from __future__ import annotations

import os

from .errors import WebinferError


def register(build_parser, serve_parser, cmd_serve) -> None:
    """The flags on ``webinfer build`` and ``webinfer serve`` (one call from cli.parser)."""
    add_build_flags(build_parser)
    add_serve_flags(serve_parser, cmd_serve)


def add_serve_flags(s, cmd_serve) -> None:
    """``--api`` turns ``webinfer serve`` from a static file server into the API server (serve_api.py)."""
    s.add_argument("--api", action="store_true",
                   help="serve OpenAI's API (/v1/chat/completions, /v1/embeddings, /v1/models) for the artifact "
                        "DIRECTORY on 127.0.0.1, no key (a generation or a --sentence-embedding artifact)")
    s.add_argument("--embeddings", metavar="ART", help="with --api: also serve /v1/embeddings from this artifact")
    s.set_defaults(fn=lambda args: cmd_serve_api(args) if args.api or args.embeddings else cmd_serve(args))


def cmd_serve_api(args) -> int:
    if not args.api:
        raise WebinferError("--embeddings is a flag of the API server: add --api")
    for path in (args.directory, args.embeddings):
        if path is not None and not os.path.isfile(os.path.join(path, "manifest.json")):
            raise WebinferError(f"{path}: not an artifact (no manifest.json)")
    from .serve_api import serve_api

    serve_api(args.directory, args.embeddings, args.port)
    return 0


def add_build_flags(b) -> None:
    b.add_argument("--sentence-embedding", nargs="?", const="auto", metavar="MODE",
                   help="append sentence-transformers pooling and normalisation (a 'sentence_embedding' output): "
                        "auto (default: as modules.json beside the model says), mean, cls, max, mean_sqrt_len")
