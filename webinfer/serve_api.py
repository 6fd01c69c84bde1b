"""``webinfer serve ART --api``: OpenAI's HTTP API over local artifacts, on 127.0.0.1 only, no key.

    POST /v1/chat/completions   JSON, or Server-Sent Events with "stream": true (``data: {chunk}`` lines, then
                                ``data: [DONE]``)
    POST /v1/embeddings         an artifact built with --sentence-embedding (``--embeddings ART``)
    GET  /v1/models

So the ``openai`` Python package (``OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="none")``) and other
OpenAI clients run against the local GPU. Errors are OpenAI's shape, one line: ``{"error": {"message", "type",
"param", "code"}}`` with 400 (bad request), 404 (unknown path or model), 413 (body over ``MAX_BODY``), 500.
One generation runs at a time (the artifact has one KV cache): requests queue on a lock. Any Authorization
header is accepted and ignored; the server binds the loopback address only.
"""

from __future__ import annotations

import http.server
import json
import sys
import threading
from http import HTTPStatus

from .errors import WebinferError
from .llm.api_request import parse_chat_request
from .llm.chat_completion import completion, completion_chunks
from .llm.openai_api import Client, sync_iter
from .runtime.session import run_sync
from .serve import bind

HOST = "127.0.0.1"
MAX_BODY = 4 * 2**20  # bytes: a long conversation fits, a runaway upload does not


class ApiError(Exception):
    def __init__(self, status: int, message: str, kind: str = "invalid_request_error", code: str | None = None):
        super().__init__(message)
        self.status, self.kind, self.code = status, kind, code


class ApiHandler(http.server.BaseHTTPRequestHandler):
    client: Client
    lock: threading.Lock
    quiet = True
    protocol_version = "HTTP/1.1"
    default_request_version = "HTTP/1.0"

    # -- plumbing ------------------------------------------------------------------------------------------
    def _send_json(self, status: int, body: dict) -> None:
        data = json.dumps(body, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, e: ApiError) -> None:
        self._send_json(e.status, {"error": {"message": str(e).splitlines()[0] if str(e) else "error",
                                             "type": e.kind, "param": None, "code": e.code}})

    def _body(self) -> dict:
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            raise ApiError(HTTPStatus.LENGTH_REQUIRED, "a JSON body with a Content-Length is required") from None
        if length < 0 or length > MAX_BODY:
            self.close_connection = True
            raise ApiError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"the request body is over {MAX_BODY} bytes")
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except (ValueError, UnicodeDecodeError) as e:
            raise ApiError(HTTPStatus.BAD_REQUEST, f"the body is not valid JSON ({e})") from None
        if not isinstance(body, dict):
            raise ApiError(HTTPStatus.BAD_REQUEST, "the body must be a JSON object")
        return body

    def _route(self, method: str) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        routes = {("GET", "/v1/models"): self._models, ("POST", "/v1/chat/completions"): self._chat,
                  ("POST", "/v1/embeddings"): self._embeddings}
        try:
            handler = routes.get((method, path))
            if handler is None:
                raise ApiError(HTTPStatus.NOT_FOUND, f"no route {method} {path or '/'} (the API: GET /v1/models, "
                               "POST /v1/chat/completions, POST /v1/embeddings)", code="not_found")
            handler()
        except ApiError as e:
            self._error(e)
        except WebinferError as e:
            missing = "is not loaded here" in str(e) or str(e).startswith("no ")
            self._error(ApiError(HTTPStatus.NOT_FOUND if missing else HTTPStatus.BAD_REQUEST, str(e),
                                 code="model_not_found" if missing else None))
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as e:  # a bug of ours: one line to the client and the log, never a traceback
            if not self.quiet:
                print(f"webinfer serve: internal error: {type(e).__name__}: {e}", file=sys.stderr)
            self._error(ApiError(HTTPStatus.INTERNAL_SERVER_ERROR, f"internal error: {type(e).__name__}",
                                 kind="server_error"))

    def do_GET(self) -> None:  # noqa: N802
        self._route("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._route("POST")

    def do_OPTIONS(self) -> None:  # noqa: N802
        self._route("OPTIONS")

    def log_message(self, format: str, *args) -> None:
        if not self.quiet:
            super().log_message(format, *args)

    # -- the API --------------------------------------------------------------------------------------------
    def _models(self) -> None:
        self._send_json(HTTPStatus.OK, self.client.models.list())

    def _chat(self) -> None:
        req = parse_chat_request(self._body())
        self.client.check_model(req.model, "chat")
        gen, model = self.client.generator, self.client.model
        with self.lock:
            if not req.stream:
                self._send_json(HTTPStatus.OK, run_sync(completion(gen, req, model)))
                return
            chunks = sync_iter(completion_chunks(gen, req, model))
            try:
                first = next(chunks)  # a request the model refuses is still a JSON error, not a stream
            except StopIteration:
                first = None
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                for chunk in ([first] if first is not None else []):
                    self._event(chunk)
                for chunk in chunks:
                    self._event(chunk)
            except WebinferError as e:  # mid-stream: an error event, as OpenAI sends one
                self._event({"error": {"message": str(e), "type": "invalid_request_error", "param": None,
                                       "code": None}})
            finally:
                chunks.close()  # a client that hung up: the generation stops, the KV cache stays consistent
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    def _event(self, chunk: dict) -> None:
        self.wfile.write(b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n")
        self.wfile.flush()

    def _embeddings(self) -> None:
        body = self._body()
        if "input" not in body:
            raise ApiError(HTTPStatus.BAD_REQUEST, "input is required")
        kwargs = {k: v for k, v in body.items() if k != "input" and v is not None}
        with self.lock:
            self._send_json(HTTPStatus.OK, self.client.embeddings.create(body["input"], **kwargs))


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    quiet = True

    def handle_error(self, request, client_address) -> None:
        if not self.quiet:
            exc = sys.exc_info()[1]
            print(f"{client_address[0]} - request failed: {type(exc).__name__}: {exc}", file=sys.stderr)


def make_api_server(client: Client, port: int = 0, quiet: bool = True) -> http.server.ThreadingHTTPServer:
    """An API server for ``client`` on 127.0.0.1 (port 0: a free one, ``server.server_port``)."""
    handler = type("_ApiHandler", (ApiHandler,), {"client": client, "lock": threading.Lock(), "quiet": quiet})
    server = bind(_Server, handler, port)  # (a busy port: one line)
    server.quiet = quiet
    return server


def serve_api_in_thread(client: Client, port: int = 0):
    """Start on a daemon thread; returns the server and its base URL (``.../v1``)."""
    server = make_api_server(client, port)
    threading.Thread(target=server.serve_forever, name="webinfer-api", daemon=True).start()
    return server, f"http://{HOST}:{server.server_port}/v1"


def serve_api(artifact: str | None, embeddings: str | None = None, port: int = 8000) -> None:
    """``webinfer serve ART --api [--embeddings ART]``: serve until interrupted."""
    client = Client.load(artifact, embeddings)
    server = make_api_server(client, port, quiet=False)
    print(f"OpenAI API for {', '.join(client.model_ids())} on http://{HOST}:{server.server_port}/v1 "
          "(Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
