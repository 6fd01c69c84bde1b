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
