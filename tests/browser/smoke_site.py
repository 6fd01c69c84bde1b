"""The smoke test's site (a checkout-only harness, web/smoke/): the boot page, Pyodide, webinfer's browser
wheel, the artifact and its inputs, all served from one origin.

    index.html, boot.mjs, main.py   from web/smoke/ (the page, its JS boot, the Python it runs)
    pyodide/                        Pyodide's runtime files (webinfer.web.pyodide_dir)
    wheels/webinfer-*.whl           the browser wheel (webinfer.web.browser_wheel)
    artifact/                       a copy of the artifact directory
    inputs.json                     the feeds: name -> {dtype, shape, b64 of the raw little-endian bytes}, or a list
    site.json                       where the page finds the above
"""

from __future__ import annotations

import base64
import json
import os
import shutil

import numpy as np

from webinfer.web import browser_wheel, copy_pyodide, pyodide_dir

SMOKE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "web", "smoke")


def encode_inputs(inputs: dict) -> dict:
    """numpy arrays -> the JSON form the page decodes into HostTensors."""
    out = {}
    for name, value in inputs.items():
        a = np.asarray(value, order="C")
        out[name] = {"dtype": str(a.dtype), "shape": list(a.shape),
                     "b64": base64.b64encode(a.astype(a.dtype.newbyteorder("<")).tobytes()).decode()}
    return out


def build_smoke_site(artifact_dir: str, out_dir: str, inputs: dict | list, wheel: str | None = None) -> str:
    """Write the site for ``artifact_dir`` into ``out_dir`` (replacing its artifact); returns ``out_dir``.
    ``inputs``: name -> numpy array, or a list of such sets (run in order in one session)."""
    os.makedirs(out_dir, exist_ok=True)
    for name in ("index.html", "boot.mjs", "main.py"):
        shutil.copyfile(os.path.join(SMOKE_DIR, name), os.path.join(out_dir, name))
    copy_pyodide(pyodide_dir(), out_dir)
    wheels = os.path.join(out_dir, "wheels")
    shutil.rmtree(wheels, ignore_errors=True)
    os.makedirs(wheels)
    wheel = browser_wheel(wheels) if wheel is None else shutil.copy(wheel, wheels)
    art = os.path.join(out_dir, "artifact")
    shutil.rmtree(art, ignore_errors=True)
    shutil.copytree(artifact_dir, art)
    with open(os.path.join(out_dir, "inputs.json"), "w") as f:
        json.dump([encode_inputs(i) for i in inputs] if isinstance(inputs, list) else encode_inputs(inputs), f)
    with open(os.path.join(out_dir, "site.json"), "w") as f:
        json.dump({"wheel": f"wheels/{os.path.basename(wheel)}", "artifact": "artifact/",
                   "inputs": "inputs.json"}, f, indent=1)
    return out_dir


def run_smoke_page(page, site: str, timeout_ms: int = 420_000) -> dict:
    """Serve ``site`` on 127.0.0.1, open its page and wait until it is done; returns its ``runs`` (one outputs
    dict per set of feeds, decoded to numpy), ``outputs`` and ``timings``. A page error fails the test with the
    console's last lines."""
    from webinfer.serve import serve_in_thread

    server, url = serve_in_thread(site)
    console = []
    page.on("console", lambda m: console.append(f"[{m.type}] {m.text}"))
    try:
        page.goto(url + "index.html")
        page.wait_for_selector("#outputs[data-done]", state="attached", timeout=timeout_ms)
        el = page.locator("#outputs")
        assert el.get_attribute("data-error") is None, el.get_attribute("data-error") + "\n" + "\n".join(console[-30:])
        raw = {k: el.get_attribute(f"data-{k}") for k in ("runs", "outputs", "timings")}
    finally:
        server.shutdown()
        server.server_close()
    decoded = {k: json.loads(v) if v else None for k, v in raw.items()}
    decoded["runs"] = [{name: decode_output(o) for name, o in run.items()} for run in decoded["runs"] or []]
    return decoded


def decode_output(o: dict) -> np.ndarray:
    """One output as the page encodes it ({dtype, shape, b64}) -> numpy."""
    return np.frombuffer(base64.b64decode(o["b64"]), dtype=o["dtype"]).reshape(o["shape"])
