"""``webinfer serve DIR``: a static file server for webinfer's web pages, on 127.0.0.1 only.

Browsers expose ``navigator.gpu`` only to secure contexts; ``http://127.0.0.1`` is one, and binding to the
loopback address keeps the pages (and the artifact's weights) off the network. Standard library only.
"""

from __future__ import annotations

import functools
import http.server
import os
import sys
import threading
import urllib.parse
from http import HTTPStatus

from .errors import WebinferError

HOST = "127.0.0.1"

# Python's mimetypes table depends on the machine (/etc/mime.types); these must be right everywhere:
# WebAssembly.instantiateStreaming needs application/wasm, module scripts need a JavaScript type.
MIME_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".map": "application/json",
    ".wasm": "application/wasm",
    ".wgsl": "text/plain; charset=utf-8",
    ".py": "text/plain; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".zip": "application/zip",
    ".whl": "application/zip",
    ".bin": "application/octet-stream",
    ".npy": "application/octet-stream",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
}

# Pyodide's runtime files are large and versioned by the npm lock: let the browser keep them. Everything
# else (pages, artifacts, our wheel) changes between builds, so it must be revalidated each time.
_IMMUTABLE_DIRS = ("pyodide/",)


class Handler(http.server.SimpleHTTPRequestHandler):
    """SimpleHTTPRequestHandler with fixed MIME types, cache headers and quiet logs."""

    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **MIME_TYPES}
    # A request line without a version would be answered as HTTP/0.9 (a body with no status line): reply to
    # garbage with a real "HTTP/1.0 400" instead.
    default_request_version = "HTTP/1.0"
    quiet = True

    def send_head(self):
        """Files only, and only inside the site: a NUL or undecodable path is a bad request (400); a folder
        without index.html, or a symbolic link leading out of the site, is not found (404)."""
        raw = self.path.split("?", 1)[0].split("#", 1)[0]
        try:
            path = urllib.parse.unquote(raw, errors="strict")
        except UnicodeDecodeError:
            path = None
        if path is None or "\0" in path:
            self.send_error(HTTPStatus.BAD_REQUEST, "Bad request path")
            return None
        full = self.translate_path(self.path)
        if os.path.isdir(full):
            full = os.path.join(full, "index.html")
        root = os.path.realpath(self.directory)
        if os.path.commonpath([root, os.path.realpath(full)]) != root:
            self.send_error(HTTPStatus.NOT_FOUND, "File not found")
            return None
        return super().send_head()

    def list_directory(self, path):
        self.send_error(HTTPStatus.NOT_FOUND, "File not found")
        return None

    def end_headers(self) -> None:
        path = getattr(self, "path", "").split("?", 1)[0].lstrip("/")
        if path.startswith(_IMMUTABLE_DIRS):
            self.send_header("Cache-Control", "public, max-age=86400")
        else:
            self.send_header("Cache-Control", "no-cache")
        # Same-origin isolation: lets pages use SharedArrayBuffer/threads; harmless otherwise.
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        super().end_headers()

    def log_message(self, format: str, *args) -> None:
        if not self.quiet:
            super().log_message(format, *args)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    quiet = True

    def handle_error(self, request, client_address) -> None:
        """One log line per failed request (typically a client that hung up), never a traceback."""
        if not self.quiet:
            exc = sys.exc_info()[1]
            print(f"{client_address[0]} - request failed: {type(exc).__name__}: {exc}", file=sys.stderr)


def make_server(directory: str, port: int = 0, quiet: bool = True) -> http.server.ThreadingHTTPServer:
    """A server for ``directory`` on 127.0.0.1 (port 0: a free one; read it from ``server.server_port``)."""
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"{directory}: no such directory to serve")
    handler = functools.partial(type("_Handler", (Handler,), {"quiet": quiet}), directory=os.path.abspath(directory))
    server = bind(_Server, handler, port)
    server.quiet = quiet
    return server


def bind(server_class, handler, port: int):
    """``server_class((HOST, port), handler)``; a port that cannot be had is the user's one-line error."""
    try:
        return server_class((HOST, port), handler)
    except OSError as e:
        raise WebinferError(f"cannot listen on {HOST}:{port} ({e.strerror or e}): choose another --port "
                            "(0: any free port)") from None


def serve_in_thread(directory: str, port: int = 0) -> tuple[http.server.ThreadingHTTPServer, str]:
    """Start a server on a daemon thread; returns it and its base URL. Stop with ``server.shutdown()``."""
    server = make_server(directory, port)
    threading.Thread(target=server.serve_forever, name="webinfer-serve", daemon=True).start()
    return server, f"http://{HOST}:{server.server_port}/"


def serve(directory: str, port: int = 8000) -> None:
    """Serve ``directory`` on http://127.0.0.1:PORT/ until interrupted (``webinfer serve DIR --port N``)."""
    server = make_server(directory, port, quiet=False)
    print(f"serving {os.path.abspath(directory)} on http://{HOST}:{server.server_port}/ (Ctrl-C to stop)",
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
