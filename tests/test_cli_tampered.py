"""A tampered artifact (one shader or weight byte changed, sizes kept) is refused in one line by every command
that reads it, and ``bundle`` publishes nothing of it."""

from __future__ import annotations

import shutil

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from webinfer.build import build
from webinfer.cli import main


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tamper")
    w = numpy_helper.from_array(np.arange(8, dtype=np.float32).reshape(2, 4), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), str(tmp / "m.onnx"))
    build(str(tmp / "m.onnx"), str(tmp / "m.wi"), target="software")
    return tmp / "m.wi"


def _flip_one_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01  # same size: only the sha256 can tell
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("part", ["shaders", "weights"])
def test_tampered_files_are_refused_everywhere(artifact, tmp_path, capsys, part):
    bad = tmp_path / "bad.wi"
    shutil.copytree(artifact, bad)
    _flip_one_byte(sorted((bad / part).iterdir())[0])
    np.save(tmp_path / "x.npy", np.ones((1, 2), np.float32))
    for argv in (["run", str(bad), "--input", f"x={tmp_path / 'x.npy'}"], ["inspect", str(bad)],
                 ["bundle", str(bad), "-o", str(tmp_path / "site")]):
        rc = main(argv)
        err = capsys.readouterr().err.strip()
        assert rc == 2 and err.startswith("webinfer: error: ") and "\n" not in err, (argv[0], err)
        assert "sha256 does not match the manifest" in err, (argv[0], err)
    assert not (tmp_path / "site").exists()  # nothing published
