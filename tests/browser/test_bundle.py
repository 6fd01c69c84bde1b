"""`webinfer bundle` / `build --web`: the static site's layout, page accumulation, and clear errors (the page
itself runs in Chromium in test_package.py, built from an installed wheel)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from webinfer.build import build
from webinfer.bundle import bundle
from webinfer.errors import WebinferError


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    out = tmp_path_factory.mktemp("bundle")
    w = numpy_helper.from_array(np.arange(4, dtype=np.float32), "w")
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["<script>alert(1)</script>"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("<script>alert(1)</script>", TensorProto.FLOAT, [4])],
                              [w])
    path = str(out / "a.wi")
    build(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return path


def test_site_layout_and_pages_accumulate(artifact, tmp_path, webinfer_wheel):
    site = str(tmp_path / "site")
    bundle(artifact, site, wheel=webinfer_wheel)
    tok = tmp_path / "tokenizer.json"
    tok.write_text("{}")
    bundle(artifact, site, demo="similarity", files=[str(tok)], wheel=webinfer_wheel)
    for rel in ("index.html", "site.json", "assets/webinfer.mjs", "assets/style.css", "pyodide/pyodide.mjs",
                "pyodide/pyodide.asm.wasm", "model/index.html", "model/page.mjs", "model/artifact/manifest.json", "assets/worker.mjs",
                "similarity/index.html", "similarity/page.mjs", "similarity/tokenizer.json"):
        assert os.path.isfile(os.path.join(site, rel)), rel
    meta = json.load(open(os.path.join(site, "site.json")))
    assert [p["path"] for p in meta["pages"]] == ["similarity", "model"]
    assert os.path.isfile(os.path.join(site, meta["wheel"]))
    index = open(os.path.join(site, "index.html")).read()
    assert 'href="similarity/"' in index and 'href="model/"' in index
    # No page embeds a model-provided string: names reach the page only as data, shown with textContent.
    for rel in ("index.html", "model/index.html", "similarity/index.html"):
        assert "<script>alert" not in open(os.path.join(site, rel)).read()
    # Nothing refers to another origin.
    for rel in ("index.html", "similarity/index.html", "assets/webinfer.mjs", "assets/worker.mjs", "similarity/page.mjs"):
        text = open(os.path.join(site, rel)).read()
        assert "https://" not in text and "http://" not in text, rel


def test_bad_input_is_a_clear_error(artifact, tmp_path):
    with pytest.raises(WebinferError, match="unknown demo 'nope'"):
        bundle(artifact, str(tmp_path / "s"), demo="nope")
    with pytest.raises(WebinferError, match="not a webinfer artifact"):
        bundle(str(tmp_path), str(tmp_path / "s"))
    with pytest.raises(WebinferError, match="no such file to bundle"):
        bundle(artifact, str(tmp_path / "s"), files=[str(tmp_path / "missing.json")])
    r = subprocess.run([sys.executable, "-m", "webinfer.cli", "bundle", str(tmp_path), "-o", str(tmp_path / "s")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("webinfer: error:") and "Traceback" not in r.stderr
