"""``serve`` and ``bundle`` as a new user meets them: a busy port, and a demo page asked for an artifact it
cannot drive, are each one line and exit status 2, with nothing written."""

from __future__ import annotations

import socket

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from webinfer.build import build
from webinfer.bundle import DEMOS
from webinfer.cli import main


def _one_line(capsys, rc, *words):
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("webinfer: error: ") and "\n" not in err, err
    for w in words:
        assert w in err, err


def test_serve_on_a_busy_port_is_one_line(tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        _one_line(capsys, main(["serve", str(tmp_path), "--port", str(port)]), f"127.0.0.1:{port}", "--port")


@pytest.fixture(scope="module")
def plain_artifact(tmp_path_factory):
    """y = x @ w: no image prologue, no tokenizer, no KV cache, no encoder."""
    tmp = tmp_path_factory.mktemp("plain")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
                          [numpy_helper.from_array(np.ones((3, 2), np.float32), "w")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), str(tmp / "m.onnx"))
    build(str(tmp / "m.onnx"), str(tmp / "m.wi"), target="software")
    return tmp / "m.wi"


@pytest.mark.parametrize("demo", sorted(set(DEMOS) - {"model", "similarity"}))
def test_a_demo_page_refuses_an_artifact_it_cannot_run(plain_artifact, tmp_path, capsys, demo):
    site = tmp_path / "site"
    _one_line(capsys, main(["bundle", str(plain_artifact), "-o", str(site), "--demo", demo]), f"--demo {demo} needs")
    assert not site.exists()


def test_version(capsys):
    """The version the package is published under (pyproject.toml)."""
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"webinfer {project['version']}"


@pytest.mark.parametrize("argv,missing", [
    (["--demo", "classify"], "add --preprocess"),
    (["--demo", "classify", "--preprocess", "P.json"], "add --postprocess"),
    (["--demo", "detect", "--preprocess", "P.json", "--task", "background-removal"], "add --task object-detection"),
    (["--demo", "removebg", "--preprocess", "P.json"], "add --task background-removal"),
])
def test_build_web_demo_flags_are_checked_before_the_build(tmp_path, capsys, argv, missing):
    rc = main(["build", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "m.wi"), "--web", str(tmp_path / "s"), *argv])
    _one_line(capsys, rc, missing)  # (before the model is read: it does not even exist)
    assert not (tmp_path / "m.wi").exists() and not (tmp_path / "s").exists()


def test_serve_api_on_an_artifact_of_neither_kind(plain_artifact, capsys):
    _one_line(capsys, main(["serve", str(plain_artifact), "--api", "--port", "0"]),
              "neither a decoder built for generation", "--sentence-embedding")
