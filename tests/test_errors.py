"""Bad input gets one clear line and a non-zero exit: never a traceback, a hang or a wrong answer."""

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import webinfer
from webinfer.build import build
from webinfer.errors import WebinferError


def _cli(*args, cwd=None):
    r = subprocess.run([sys.executable, "-m", "webinfer.cli", *args], capture_output=True, text=True, cwd=cwd,
                       timeout=300)
    return r.returncode, r.stdout, r.stderr


def _assert_one_line_error(rc, err, *words):
    assert rc != 0
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("webinfer:")]
    assert len(lines) == 1, err
    for w in words:
        assert w in lines[0], lines[0]


def _small_model(path, op="Relu", name="act"):
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], name=name)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    d = tmp_path_factory.mktemp("art")
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(np.arange(4, dtype=np.float32), "w")])
    model = str(d / "m.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model)
    out = str(d / "m.wi")
    build(model, out)
    return out


def test_not_onnx(tmp_path):
    p = tmp_path / "bad.onnx"
    p.write_text("this is not a model\n" * 10)
    rc, _, err = _cli("build", str(p), "-o", str(tmp_path / "o.wi"))
    _assert_one_line_error(rc, err, "not a valid ONNX model")


def test_truncated_model(tmp_path):
    src = _small_model(str(tmp_path / "m.onnx"))
    data = open(src, "rb").read()
    p = tmp_path / "trunc.onnx"
    p.write_bytes(data[: len(data) // 2])
    rc, _, err = _cli("build", str(p), "-o", str(tmp_path / "o.wi"))
    _assert_one_line_error(rc, err, "not a valid ONNX model")


def test_missing_file(tmp_path):
    rc, _, err = _cli("build", str(tmp_path / "nope.onnx"))
    _assert_one_line_error(rc, err, "no such file")


def test_unsupported_op_names_op_and_node(tmp_path):
    g = helper.make_graph([helper.make_node("StringNormalizer", ["x"], ["y"], name="normalize_me")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.STRING, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.STRING, None)])
    p = str(tmp_path / "u.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
    rc, _, err = _cli("build", p, "-o", str(tmp_path / "o.wi"))
    _assert_one_line_error(rc, err, "StringNormalizer", "normalize_me")


def test_external_data_outside_model_folder(tmp_path):
    inner = tmp_path / "model"
    inner.mkdir()
    (tmp_path / "secret.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    w = numpy_helper.from_array(np.zeros(4, np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for k, v in {"location": "../secret.bin", "offset": "0", "length": "16"}.items():
        e = w.external_data.add()
        e.key, e.value = k, v
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    p = str(inner / "m.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
    rc, _, err = _cli("build", p, "-o", str(tmp_path / "o.wi"))
    _assert_one_line_error(rc, err, "leaves the model's folder")


def test_wrong_feeds(artifact, tmp_path):
    s = webinfer.InferenceSession(artifact)
    with pytest.raises(WebinferError, match="missing feed for input 'x'"):
        s.run(None, {})
    with pytest.raises(WebinferError, match="expects float32, got int64"):
        s.run(None, {"x": np.zeros((2, 4), np.int64)})
    with pytest.raises(WebinferError, match="expects shape"):
        s.run(None, {"x": np.zeros((2, 5), np.float32)})
    with pytest.raises(WebinferError, match="expects rank 2"):
        s.run(None, {"x": np.zeros((4,), np.float32)})
    with pytest.raises(WebinferError, match="unknown input"):
        s.run(None, {"x": np.zeros((2, 4), np.float32), "z": np.zeros(1, np.float32)})
    np.save(tmp_path / "bad.npy", np.zeros((2, 5), np.float32))
    rc, _, err = _cli("run", artifact, "--input", f"x={tmp_path / 'bad.npy'}")
    _assert_one_line_error(rc, err, "expects shape")
    # The session stays usable after a bad call.
    y = s.run(None, {"x": np.ones((3, 4), np.float32)})[0]
    np.testing.assert_array_equal(y, np.ones((3, 4), np.float32) + np.arange(4, dtype=np.float32))


def _copy(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return str(dst)


def test_altered_shard(artifact, tmp_path):
    art = _copy(artifact, tmp_path / "a.wi")
    shard = os.path.join(art, "weights", "shard-000.bin")
    data = bytearray(open(shard, "rb").read())
    data[0] ^= 0xFF
    open(shard, "wb").write(bytes(data))
    with pytest.raises(WebinferError, match="shard-000.bin: sha256 does not match"):
        webinfer.InferenceSession(art)
    np.save(tmp_path / "x.npy", np.zeros((2, 4), np.float32))
    rc, _, err = _cli("run", art, "--input", f"x={tmp_path / 'x.npy'}")
    _assert_one_line_error(rc, err, "shard-000.bin", "sha256")


def test_truncated_shard_and_altered_shader(artifact, tmp_path):
    art = _copy(artifact, tmp_path / "t.wi")
    shard = os.path.join(art, "weights", "shard-000.bin")
    open(shard, "wb").write(open(shard, "rb").read()[:-4])
    with pytest.raises(WebinferError, match="shard-000.bin: file is .* bytes"):
        webinfer.InferenceSession(art)
    art2 = _copy(artifact, tmp_path / "s.wi")
    k = os.path.join(art2, "shaders", "k0000.wgsl")
    open(k, "a").write("\n// tampered\n")
    with pytest.raises(WebinferError, match="k0000.wgsl"):
        webinfer.InferenceSession(art2)


def test_manifest_version_and_paths(artifact, tmp_path):
    art = _copy(artifact, tmp_path / "v.wi")
    mpath = os.path.join(art, "manifest.json")
    m = json.load(open(mpath))
    m["version"] = 99
    json.dump(m, open(mpath, "w"))
    with pytest.raises(WebinferError, match="format version 99"):
        webinfer.InferenceSession(art)
    m["version"] = 1
    m["shards"][0]["file"] = "../../etc/passwd"
    json.dump(m, open(mpath, "w"))
    with pytest.raises(WebinferError, match="unsafe file path"):
        webinfer.InferenceSession(art)


def test_build_refuses_to_overwrite_other_folders(tmp_path):
    src = _small_model(str(tmp_path / "m.onnx"))
    keep = tmp_path / "mydata"
    keep.mkdir()
    (keep / "precious.txt").write_text("keep me")
    rc, _, err = _cli("build", src, "-o", str(keep))
    _assert_one_line_error(rc, err, "not a webinfer artifact")
    assert (keep / "precious.txt").read_text() == "keep me"


def test_cli_roundtrip(tmp_path):
    src = _small_model(str(tmp_path / "m.onnx"))
    out = str(tmp_path / "m.wi")
    rc, so, err = _cli("build", src, "-o", out)
    assert rc == 0, err
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    np.save(tmp_path / "x.npy", x)
    rc, so, err = _cli("run", out, "--input", f"x={tmp_path / 'x.npy'}", "--output", str(tmp_path / "o.npz"))
    assert rc == 0, err
    np.testing.assert_array_equal(np.load(tmp_path / "o.npz")["y"], np.maximum(x, 0))
    rc, so, err = _cli("inspect", out)
    assert rc == 0 and "kernels per run: 1" in so
