"""Bad input gets one clear line and a non-zero exit: never a traceback, a hang or a wrong answer."""

import json
import os
import re
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


def test_map_values_are_refused_naming_the_value(tmp_path):
    """A map that is not a ZipMap's graph output (here a DictVectorizer's map input) is refused in one line, not an
    onnx-ir error. (A ZipMap graph output builds: tests/ml/test_sklearn_models.py.)"""
    maps = helper.make_value_info("features", helper.make_map_type_proto(
        TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, [])))
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 3])
    g = helper.make_graph([helper.make_node("DictVectorizer", ["features"], ["y"], domain="ai.onnx.ml",
                                            int64_vocabulary=[0, 1, 2])], "g", [maps], [out])
    p = str(tmp_path / "dictvectorizer.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)]),
              p)
    rc, _, err = _cli("build", p, "-o", str(tmp_path / "o.wi"))
    _assert_one_line_error(rc, err, "features", "map")


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
    from artifact_fuzz import load, sign_manifest

    art = _copy(artifact, tmp_path / "v.wi")
    m = load(art)
    sign_manifest(art, dict(m, version=99))
    with pytest.raises(WebinferError, match="format version 99"):
        webinfer.InferenceSession(art)
    m["shards"][0]["file"] = "../../etc/passwd"
    sign_manifest(art, m)
    with pytest.raises(WebinferError, match=r"shards\[0\]\.file: unsafe or misplaced file path"):
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
    assert ("kernel class: software (" in so or "kernel class: software-subgroups (" in so) and "cpu adapter" in so
    # (which class ran, and why)
    np.testing.assert_array_equal(np.load(tmp_path / "o.npz")["y"], np.maximum(x, 0))
    rc, so, err = _cli("run", out, "--class", "tpu")
    assert rc == 2 and "not in this artifact" in err
    rc, so, err = _cli("inspect", out)
    assert rc == 0 and re.search(r"kernels per run +1\n", so) and "on this machine: software" in so


# -- issue 15: nothing deleted, nothing published by accident, every argument checked before work starts ----

def test_build_refuses_folder_with_another_programs_manifest(tmp_path):
    src = _small_model(str(tmp_path / "m.onnx"))
    app = tmp_path / "mywebapp"
    for rel in ("manifest.json", "assets/app.js", "weights/model.bin"):
        (app / rel).parent.mkdir(parents=True, exist_ok=True)
        (app / rel).write_text('{"name": "my web app"}' if rel == "manifest.json" else "keep me")
    rc, _, err = _cli("build", src, "-o", str(app))
    _assert_one_line_error(rc, err, "not a webinfer artifact", "refusing")
    assert sorted(p.relative_to(app).as_posix() for p in app.rglob("*") if p.is_file()) == [
        "assets/app.js", "manifest.json", "weights/model.bin"]


def test_rebuild_replaces_only_the_artifacts_own_files(tmp_path):
    src = _small_model(str(tmp_path / "m.onnx"))
    out = tmp_path / "m.wi"
    build(src, str(out))
    (out / "notes.txt").write_text("mine")
    (out / "weights" / "mine.bin").write_text("mine")
    build(_small_model(str(tmp_path / "n.onnx"), op="Neg"), str(out))
    assert (out / "notes.txt").read_text() == "mine" and (out / "weights" / "mine.bin").read_text() == "mine"
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(webinfer.InferenceSession(str(out)).run(None, {"x": x})[0], -x)


def _fake_wheel(tmp_path):
    wheel = tmp_path / "webinfer-0.0.0-py3-none-any.whl"
    wheel.write_bytes(b"PK")
    return str(wheel)


def test_bundle_publishes_only_the_artifacts_files(artifact, tmp_path):
    from webinfer.bundle import bundle

    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "passwd").write_text("root:x:0:0")
    art = _copy(artifact, tmp_path / "a.wi")
    os.symlink(secret, os.path.join(art, "etc"))
    os.symlink(secret / "passwd", os.path.join(art, "assets-link"))
    open(os.path.join(art, "stray.txt"), "w").write("not named by the manifest")
    page = bundle(art, str(tmp_path / "site"), wheel=_fake_wheel(tmp_path))
    published = sorted(os.path.relpath(os.path.join(d, f), page) for d, _, fs in os.walk(page) for f in fs)
    m = json.load(open(os.path.join(art, "manifest.json")))
    named = [e["file"] for e in m["shaders"] + m["shards"]] + list(m["assets"])
    assert [p for p in published if p.startswith("artifact/")] == sorted(
        f"artifact/{rel}" for rel in ["manifest.json", *named, *(["manifest.sha256"] if os.path.isfile(
            os.path.join(art, "manifest.sha256")) else [])])
    site = str(tmp_path / "site")
    for d, _, fs in os.walk(site):
        for f in fs:
            assert "root:x" not in open(os.path.join(d, f), errors="replace").read()


def test_bundle_refuses_a_named_file_linked_out_of_the_artifact(artifact, tmp_path):
    art = _copy(artifact, tmp_path / "a.wi")
    shard = os.path.join(art, "weights", "shard-000.bin")
    outside = tmp_path / "outside.bin"
    outside.write_bytes(open(shard, "rb").read())  # same bytes, same sha256
    os.remove(shard)
    os.symlink(outside, shard)
    rc, _, err = _cli("bundle", art, "-o", str(tmp_path / "site"))
    _assert_one_line_error(rc, err, "shard-000.bin", "out of the artifact")
    assert not (tmp_path / "site").exists()


def test_bundle_refuses_nesting_and_foreign_folders(artifact, tmp_path):
    art = _copy(artifact, tmp_path / "a.wi")
    for out, words in ((art, ("inside the artifact",)), (os.path.join(art, "site"), ("inside the artifact",)),
                       (str(tmp_path), ("inside the site",))):
        rc, _, err = _cli("bundle", art, "-o", out)
        _assert_one_line_error(rc, err, *words)
    mine = tmp_path / "mine"
    (mine / "model").mkdir(parents=True)
    (mine / "model" / "index.html").write_text("my page")
    rc, _, err = _cli("bundle", art, "-o", str(mine))
    _assert_one_line_error(rc, err, "not a webinfer site")
    assert (mine / "model" / "index.html").read_text() == "my page"
    assert sorted(os.listdir(art)) == sorted(os.listdir(artifact))


def test_model_opset_duplicates_and_short_initializers_are_named(tmp_path):
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    p = str(tmp_path / "op99.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 99)]), p)
    rc, _, err = _cli("build", p, "-o", str(tmp_path / "o.wi"))
    _assert_one_line_error(rc, err, "opset 99 is not supported")
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="a"),
                           helper.make_node("Neg", ["x"], ["y"], name="b")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    p = str(tmp_path / "dup.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
    rc, _, err = _cli("build", p, "-o", str(tmp_path / "o.wi"))
    _assert_one_line_error(rc, err, "'y' is produced twice", "'a' (Relu)", "'b' (Neg)")
    w = numpy_helper.from_array(np.arange(4, dtype=np.float32), "weights_w")
    w.raw_data = w.raw_data[:8]
    g = helper.make_graph([helper.make_node("Add", ["x", "weights_w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    p = str(tmp_path / "short.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
    for cmd in ("build", "inspect"):
        rc, _, err = _cli(cmd, p, *(["-o", str(tmp_path / "o.wi")] if cmd == "build" else []))
        _assert_one_line_error(rc, err, "initializer 'weights_w'", "8 bytes", "needs 16")
    assert not (tmp_path / "o.wi").exists()


def test_inputs_of_one_type_parameter_must_agree(tmp_path):
    """MatMul of float32 by float64 (one type parameter T in its schema) is refused, as onnxruntime refuses it;
    Concat's variadic inputs likewise."""
    cases = [([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
              numpy_helper.from_array(np.ones((4, 3), np.float64), "w"), ["MatMul node 'mm'", "A and B", "float32",
                                                                            "float64"]),
             ([helper.make_node("Concat", ["x", "w"], ["y"], axis=0)],
              numpy_helper.from_array(np.ones((1, 4), np.int64), "w"), ["a Concat node", "inputs[1] and inputs[2]",
                                                                         "int64"])]
    for nodes, w, words in cases:
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
        p = str(tmp_path / "types.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
        rc, _, err = _cli("build", p, "-o", str(tmp_path / "o.wi"))
        _assert_one_line_error(rc, err, "must have one type", *words)
    assert not (tmp_path / "o.wi").exists()


@pytest.mark.parametrize("args, words", [
    (["generate", "A", "--prompt", "p", "--temperature", "nan"], ["--temperature", "finite"]),
    (["generate", "A", "--prompt", "p", "--repetition-penalty", "nan"], ["--repetition-penalty", "finite"]),
    (["generate", "A", "--prompt", "p", "--repetition-penalty", "inf"], ["--repetition-penalty", "finite"]),
    (["generate", "A", "--prompt", "p", "--repetition-penalty", "0"], ["repetition_penalty", "> 0"]),
    (["generate", "A", "--prompt", "p", "--top-p", "nan"], ["--top-p", "finite"]),
    (["generate", "A", "--prompt", "p", "--top-p", "1.5"], ["top_p"]),
    (["generate", "A", "--prompt", "p", "--seed", str(2**70)], ["--seed", "0..4294967295"]),
    (["generate", "A", "--prompt", "p", "--seed", "-1"], ["--seed"]),
    (["generate", "A", "--prompt", "p", "--max-new-tokens", "0"], ["--max-new-tokens", "positive"]),
    (["generate", "A", "--prompt", "p", "--top-k", "-3"], ["--top-k"]),
    (["build", "M", "--max-seq", "0"], ["--max-seq", "positive"]),
    (["build", "M", "--max-seq", "-5"], ["--max-seq", "positive"]),
    (["build", "M", "--dim", "=3"], ["--dim expects name=integer"]),
    (["build", "M", "--dim", "n=-1"], ["--dim expects name=integer"]),
    (["build", "M", "--demo", "chat"], ["--demo needs --web"]),
    (["build", "M", "--report", "/nonexistent/r.json"], ["--report", "/nonexistent", "does not exist"]),
    (["build", "M", "-o", "/proc/version/x.wi"], ["-o", "not a folder"]),
    (["serve", ".", "--port", "70000"], ["--port", "0-65535"]),
    (["serve", ".", "--port", "x"], ["--port", "integer"]),
    (["bogus"], ["invalid choice"]),
])
def test_arguments_checked_before_work(args, words, artifact, tmp_path):
    """Each bad flag is refused before the model or artifact is even opened (A and M do not exist)."""
    model = _small_model(str(tmp_path / "m.onnx"))
    args = [model if a == "M" else str(tmp_path / "missing.wi") if a == "A" else a for a in args]
    rc, out, err = _cli(*args, cwd=tmp_path)
    _assert_one_line_error(rc, err, *words)
    assert rc == 2 and out == ""
    assert not any(p.suffix == ".wi" for p in tmp_path.iterdir())


def test_dim_names_must_exist(artifact, tmp_path):
    src = _small_model(str(tmp_path / "m.onnx"))
    rc, _, err = _cli("build", src, "-o", str(tmp_path / "o.wi"), "--dim", "nosuch=3")
    _assert_one_line_error(rc, err, "--dim nosuch", "its symbolic dims: n")
    rc, _, err = _cli("inspect", artifact, "--dim", "nosuch=3")
    _assert_one_line_error(rc, err, "--dim nosuch", "its symbolic dims: n")
    with pytest.raises(WebinferError, match="no symbolic dim named 'batch'"):
        build(src, str(tmp_path / "p.wi"), dims={"batch": 1})
    with pytest.raises(WebinferError, match="max-seq"):
        build(src, str(tmp_path / "p.wi"), max_seq=0)


def test_sampling_options_checked_by_the_api():
    from webinfer.llm.generate import check_options

    good = {"max_new_tokens": 4, "temperature": 0.7, "top_k": 5, "top_p": 0.9, "repetition_penalty": 1.1, "seed": 7}
    check_options(**good)
    for key, bad in [("temperature", float("nan")), ("temperature", float("inf")), ("temperature", -1.0),
                     ("top_p", float("nan")), ("repetition_penalty", float("nan")),
                     ("repetition_penalty", float("inf")), ("seed", 2**70), ("seed", -1), ("max_new_tokens", 0),
                     ("top_k", 1.5)]:
        with pytest.raises(WebinferError, match=key):
            check_options(**{**good, key: bad})


def test_run_output_paths(artifact, tmp_path):
    np.save(tmp_path / "x.npy", np.ones((2, 4), np.float32))
    feed = f"x={tmp_path / 'x.npy'}"
    rc, out, err = _cli("run", artifact, "--input", feed, "--output", "/nonexistent/o.npz")
    _assert_one_line_error(rc, err, "--output", "/nonexistent")
    assert "ran in" not in out  # refused before the run
    (tmp_path / "outdir").mkdir()
    rc, out, err = _cli("run", artifact, "--input", feed, "--output", str(tmp_path / "outdir"))
    _assert_one_line_error(rc, err, "--output", "is a folder")
    rc, out, err = _cli("run", artifact, "--input", feed, "--output", str(tmp_path / "outdir" / "res"))
    assert rc == 0, err
    assert f"wrote {tmp_path / 'outdir' / 'res.npz'}" in out
    np.testing.assert_array_equal(np.load(tmp_path / "outdir" / "res.npz")["y"], np.ones((2, 4)) + np.arange(4))
