"""`webinfer serve`: loopback only, MIME types browsers insist on, cache headers."""

import urllib.request

from webinfer.serve import serve_in_thread


def test_serve_mime_types_and_cache(tmp_path):
    files = {"index.html": "text/html", "boot.mjs": "text/javascript", "pyodide/pyodide.asm.wasm": "application/wasm",
             "pyodide/pyodide.asm.mjs": "text/javascript", "artifact/manifest.json": "application/json"}
    for rel in files:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"x")
    server, url = serve_in_thread(str(tmp_path))
    try:
        assert server.server_address[0] == "127.0.0.1" and url.startswith("http://127.0.0.1:")
        for rel, mime in files.items():
            with urllib.request.urlopen(url + rel) as r:
                assert r.headers["Content-Type"].split(";")[0] == mime, rel
                cache = r.headers["Cache-Control"]
                assert cache == ("public, max-age=86400" if rel.startswith("pyodide/") else "no-cache"), rel
    finally:
        server.shutdown()
        server.server_close()


def _raw(url: str, request: bytes) -> bytes:
    import socket
    from urllib.parse import urlparse

    u = urlparse(url)
    with socket.create_connection((u.hostname, u.port), timeout=10) as s:
        s.sendall(request)
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    return data


def test_serve_no_listings_no_links_out_no_tracebacks(tmp_path, capfd):
    """Folders are not listed, links out of the site are not followed, malformed requests get 400, and the log
    has one line per request, never a traceback."""
    import urllib.error

    from webinfer.serve import make_server

    site, secret = tmp_path / "site", tmp_path / "secret"
    (site / "page").mkdir(parents=True)
    (site / "page" / "index.html").write_text("page")
    (site / "bare").mkdir()
    (site / "bare" / "data.bin").write_bytes(b"d")
    secret.mkdir()
    (secret / "passwd").write_text("root:x:0:0")
    (site / "etc").symlink_to(secret)
    (site / "pw").symlink_to(secret / "passwd")
    (site / "inside").symlink_to(site / "bare" / "data.bin")
    import threading

    server = make_server(str(site), 0, quiet=False)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/"
    try:
        with urllib.request.urlopen(url + "page/") as r:
            assert r.read() == b"page"
        with urllib.request.urlopen(url + "inside") as r:
            assert r.read() == b"d"
        for rel in ("", "bare/", "etc/", "etc/passwd", "pw", "../secret/passwd", "%2e%2e/secret/passwd"):
            try:
                urllib.request.urlopen(url + rel)
                raise AssertionError(f"{rel!r} was served")
            except urllib.error.HTTPError as e:
                assert e.code == 404, rel
        for request in (b"GET /\x00 HTTP/1.0\r\n\r\n", b"GET /%00 HTTP/1.0\r\n\r\n", b"GET /%ff%fe HTTP/1.0\r\n\r\n",
                        b"GARBAGE\r\n\r\n", b"\xff\xfe HTTP/1.0\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n"):
            reply = _raw(url, request)
            assert reply.split(b"\r\n")[0].split(b" ")[1] in (b"400", b"505"), (request, reply[:80])
            assert b"root:x" not in reply
    finally:
        server.shutdown()
        server.server_close()
    log = capfd.readouterr().err
    assert "Traceback" not in log and "root:x" not in log
