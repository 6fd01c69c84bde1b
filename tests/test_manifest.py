"""The manifest as a typed, fully validated schema (issue 15): each corruption the issue found is now one named
error, manifest.sha256 is written and checked, the builder holds itself to the schema, `inspect` verifies
what `run` verifies, and a shader the device refuses is named."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from artifact_fuzz import load, rewrite_file, sign_manifest
from onnx import TensorProto, helper, numpy_helper

import webinfer
from webinfer.artifact import ArtifactWriter
from webinfer.build import build
from webinfer.errors import WebinferError
from webinfer.format.manifest import parse_manifest
from webinfer.format.schema import VERSION

X = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    """x[n, 4] @ W[4, 4] + b, then Relu: two weights (two chunks), a few shaders, both kernel classes."""
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")]
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
                           helper.make_node("Relu", ["a"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    out = str(tmp_path_factory.mktemp("schema") / "m.wi")
    build(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), out)
    return out


def _copy(src, tmp_path, name="a.wi") -> str:
    dst = str(tmp_path / name)
    shutil.copytree(src, dst)
    return dst


def _forge(art: str, edit) -> None:
    m = load(art)
    edit(m)
    sign_manifest(art, m)


def _refused(art: str, *words) -> str:
    with pytest.raises(WebinferError) as e:
        webinfer.InferenceSession(art).run(None, {"x": X})
    msg = str(e.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, msg
    return msg


def test_schema_round_trip_names_every_field(artifact):
    m = load(artifact)
    assert parse_manifest(m, "m").to_json() == m  # nothing in the manifest is outside the schema
    assert m["version"] == VERSION and len(m["programs"]) >= 2


def test_manifest_sha256_written_and_checked(artifact, tmp_path):
    art = _copy(artifact, tmp_path)
    text = open(os.path.join(art, "manifest.sha256")).read()
    raw = open(os.path.join(art, "manifest.json"), "rb").read()
    assert text == f"{hashlib.sha256(raw).hexdigest()}  manifest.json\n"  # `sha256sum -c manifest.sha256`
    with open(os.path.join(art, "manifest.json"), "ab") as f:
        f.write(b" ")
    _refused(art, "manifest.json", "sha256 does not match manifest.sha256")
    os.remove(os.path.join(art, "manifest.sha256"))
    _refused(art, "no manifest.sha256")


@pytest.mark.parametrize("what, edit, words", [
    ("a weight chunk past its shard's end",
     lambda m: m["tensors"][_weight(m)]["chunks"][0].__setitem__(1, m["shards"][0]["bytes"]),
     ["chunks[0]", "past the end of weights/shard-000.bin"]),
    ("a chunk shorter than its tensor",
     lambda m: m["tensors"][_weight(m)]["chunks"][0].__setitem__(2, 8),
     ["chunks", "hold 8 bytes", "need 64"]),
    ("an offset on a tensor that is no view", lambda m: m["tensors"][_weight(m)].__setitem__("offset", 4),
     [".offset", "only a view"]),
    ("a negative shape", lambda m: m["tensors"][_weight(m)]["shape"].__setitem__(0, -4), ["shape[0]", "negative dim"]),
    ("an out-of-range shader index", lambda m: m["programs"][0]["steps"][0].__setitem__("shader", 99),
     ["programs[0].steps[0].shader", "shader 99 does not exist"]),
    ("an out-of-range tensor index", lambda m: m["programs"][1]["steps"][0]["reads"].__setitem__(0, 999),
     ["programs[1].steps[0].reads[0]", "tensor 999 does not exist"]),
    ("an out-of-range shard index", lambda m: m["tensors"][_weight(m)]["chunks"][0].__setitem__(0, 7),
     ["chunks[0]", "shard 7 does not exist"]),
    ("a string where a list belongs", lambda m: m["programs"][0]["steps"][0].__setitem__("reads", "0 1"),
     ["programs[0].steps[0].reads", "expected a list, got a string"]),
    ("a number where the control list belongs", lambda m: m["programs"][0].__setitem__("control", -7),
     ["programs[0].control", "expected a list"]),
    ("a bool where an index belongs", lambda m: m["inputs"][0].__setitem__("tensor", True),
     ["inputs[0].tensor", "expected an integer, got a boolean"]),
    ("an unknown field", lambda m: m["tensors"][0].__setitem__("stride", [1]), ["tensors[0]", "unknown field"]),
    ("an output no step writes", lambda m: (m["tensors"].append(dict(m["tensors"][0], kind="temp")),
                                             m["programs"][0]["outputs"][0].__setitem__("tensor", len(m["tensors"]) - 1)),
     ["programs[0].outputs[0]", "is not written by the steps"]),
    ("an undeclared dim", lambda m: m["tensors"][0]["shape"].__setitem__(0, "batch"),
     ["tensors[0].shape[0]", "'batch' is not one of the artifact's dims"]),
    ("a texture of a tensor that is no weight", lambda m: m["programs"][0].__setitem__("textures", [[0, "r32float"]]),
     ["programs[0].textures[0]", "is not a weight the program reads"]),
    ("an unknown texel format", lambda m: m["programs"][0].__setitem__(
        "textures", [[m["programs"][0]["weights"][0], "rgb9e5ufloat"]]), ["programs[0].textures[0][1]", "is not one of"]),
])
def test_corrupt_manifest_is_named(artifact, tmp_path, what, edit, words):
    """The structural corruptions the issue ran with exit 0 or met as IndexError/TypeError, forged with valid
    hashes so that only the schema can refuse them."""
    art = _copy(artifact, tmp_path)
    _forge(art, edit)
    _refused(art, "manifest.json", *words)


def test_weight_texture_the_shader_reads_as_a_buffer_is_named(artifact, tmp_path):
    """A program that says a weight is a texture where its shaders bind a buffer: refused at the shader."""
    art = _copy(artifact, tmp_path)
    _forge(art, lambda m: [p.__setitem__("textures", [[p["weights"][0], "r32float"]]) for p in m["programs"]])
    _refused(art, ".wgsl", "the shader's bindings do not match its step")


def _weight(m) -> int:
    return next(i for i, t in enumerate(m["tensors"]) if t["kind"] == "weight" and t["shape"] == [4, 4])


def test_non_utf8_and_invalid_shaders_are_named(artifact, tmp_path):
    art = _copy(artifact, tmp_path, "u.wi")
    m = load(art)
    used = m["programs"][_chosen(art)]["steps"][0]["shader"]
    entry = m["shaders"][used]
    src = open(os.path.join(art, entry["file"]), "rb").read()
    rewrite_file(art, m, entry, b"\xff" + src)
    sign_manifest(art, m)
    _refused(art, entry["file"], "not UTF-8")
    art = _copy(artifact, tmp_path, "w.wi")
    m = load(art)
    entry = m["shaders"][used]
    at = src.rindex(b"}")
    rewrite_file(art, m, entry, src[:at] + b"  let broken: u32 = ;\n" + src[at:])  # bindings intact, WGSL not
    sign_manifest(art, m)
    _refused(art, entry["file"], "the device refuses the shader")
    r = subprocess.run([sys.executable, "-m", "webinfer.cli", "inspect", art], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith("webinfer: error:") and entry["file"] in r.stderr and len(r.stderr.splitlines()) == 1


def _chosen(art) -> int:
    return webinfer.InferenceSession(art).choice.index


def test_inspect_verifies_what_run_verifies(artifact, tmp_path):
    """A shader of the program this machine does not run, or a shard byte: `inspect` used to call it fine."""
    art = _copy(artifact, tmp_path)
    m = load(art)
    other = 1 - _chosen(art)
    used = {s["shader"] for s in m["programs"][_chosen(art)]["steps"]}
    only_other = next(s["shader"] for s in m["programs"][other]["steps"] if s["shader"] not in used)
    path = os.path.join(art, m["shaders"][only_other]["file"])
    open(path, "a").write("// tampered\n")
    r = subprocess.run([sys.executable, "-m", "webinfer.cli", "inspect", art], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert "bytes" in r.stderr or "sha256" in r.stderr, r.stderr
    assert m["shaders"][only_other]["file"] in r.stderr
    r = subprocess.run([sys.executable, "-m", "webinfer.cli", "inspect", artifact], capture_output=True, text=True)
    assert r.returncode == 0 and "verified: " in r.stdout and "shaders compiled" in r.stdout


def test_builder_refuses_to_write_an_invalid_manifest(tmp_path):
    writer = ArtifactWriter(str(tmp_path / "bad.wi"))
    writer.add_weight(np.ones(4, np.float32).tobytes())
    bad = {"producer": "t", "options": {"target": "software", "limits": "webgpu", "f16": "off", "classes": []},
           "dims": [], "inputs": [], "states": [], "bounds": {}, "index_bounds": {}, "groups": {"inputs": {}, "outputs": {}},
           "passes": [],
           "tensors": [{"dtype": "float32", "shape": [5], "kind": "weight", "alias": None,
                        "chunks": [[0, 0, 16, 0]]}], "programs": []}
    with pytest.raises(RuntimeError, match="invalid artifact: .*hold 16 bytes, the tensor's dtype and shape need 20"):
        writer.write(bad)
    assert not os.path.exists(tmp_path / "bad.wi")  # nothing written


def test_json_bombs_are_refused(artifact, tmp_path):
    art = _copy(artifact, tmp_path)
    sign_manifest(art, text=b"[" * 200000 + b"]" * 200000)
    _refused(art, "not valid JSON")
    sign_manifest(art, text=json.dumps(dict(load(artifact), producer=float("nan"))).encode())
    _refused(art, "not valid JSON", "NaN")


@pytest.fixture(scope="module")
def loop_artifact(tmp_path_factory):
    """A while loop with a data-dependent condition and a scan output (manifest v2 ``control``)."""
    from codegen.test_control_flow import _while_model

    out = str(tmp_path_factory.mktemp("loop") / "l.wi")
    build(_while_model(), out)
    return out


def _loop(m) -> dict:
    return next(c for c in m["programs"][0]["control"] if c["kind"] == "loop")


def _overlapping_if(m) -> None:
    lo, hi = _loop(m)["body"]
    assert 1 <= lo and hi > lo + 1
    m["programs"][0]["control"].append({"kind": "if", "cond": {"dim": 1}, "branches": [[0, lo + 1], [lo + 1, lo + 1]]})


@pytest.mark.parametrize("edit, words", [
    (lambda m: _loop(m)["body"].__setitem__(1, 10**6), ["control[0]", "past the program's"]),
    (lambda m: _loop(m)["cond_out"].__setitem__("tensor", 999), ["control[0].cond_out.tensor", "tensor 999 does not"]),
    (lambda m: _loop(m).__setitem__("cond_out", "go"), ["control[0].cond_out", "expected an object, got a string"]),
    (lambda m: _loop(m).__setitem__("kind", "goto"), ["control[0].kind", "'goto' is not one of if, loop, count"]),
    (lambda m: _loop(m).__setitem__("bound", _loop(m)["bound"] + 1), ["control[0].bound", "differs from bounds"]),
    (lambda m: _loop(m).__setitem__("body", [5, 2]), ["control[0].body", "ends before it starts"]),
    (_overlapping_if, ["control[1]", "overlap those of", "without nesting"]),
])
def test_corrupt_control_entries_are_named(loop_artifact, tmp_path, edit, words):
    """If/Loop/Scan entries (runtime/control_flow.py walks them): a range, scalar or bound out of place would be
    an IndexError or a wrong walk over the steps; now a named error."""
    assert parse_manifest(load(loop_artifact), "l").to_json() == load(loop_artifact)  # control is in the schema
    art = _copy(loop_artifact, tmp_path)
    _forge(art, edit)
    with pytest.raises(WebinferError) as e:
        webinfer.InferenceSession(art)
    assert "\n" not in str(e.value) and "manifest.json: manifest programs[0]." in str(e.value)
    for w in words:
        assert w in str(e.value), str(e.value)


@pytest.fixture(scope="module")
def vision_artifact(tmp_path_factory):
    """An image prologue (--preprocess) and a classify epilogue with labels (--postprocess)."""
    from graph.test_prepost import classifier_model

    root = tmp_path_factory.mktemp("vision")
    (root / "labels.txt").write_text("\n".join("abcdef") + "\n", encoding="utf-8")
    out = str(root / "v.wi")
    build(classifier_model(), out, preprocess={"resize": {"shorter": 18}, "crop": [16, 16]},
          postprocess={"softmax": True, "top_k": 3, "labels": str(root / "labels.txt")})
    return out


@pytest.mark.parametrize("edit, words", [
    (lambda m: m["classify"].__setitem__("scores", "nope"), ["classify.scores", "not an output of programs[0]"]),
    (lambda m: m["classify"].__setitem__("labels", "other.txt"), ["classify.labels", "not one of the artifact's assets"]),
    (lambda m: m["classify"].__setitem__("top_k", 0), ["classify.top_k", "out of range"]),
    (lambda m: m["preprocess"].__setitem__("image", "pixels"), ["preprocess.image", "'pixels' is not an input"]),
    (lambda m: m["preprocess"].__setitem__("layout", "CHW"), ["preprocess.layout", "not one of NCHW, NHWC"]),
    (lambda m: m["preprocess"].__setitem__("mean", [0.5]), ["preprocess", "one value per channel"]),
    (lambda m: m["programs"][0].__setitem__("guards", [["zz", "why"]]), ["programs[0].guards[0][0]", "'zz'"]),
    (lambda m: m["programs"][0].__setitem__("guards", [[0]]), ["programs[0].guards[0]", "expected 2 items"]),
])
def test_corrupt_vision_fields_are_named(vision_artifact, tmp_path, edit, words):
    """The prologue/epilogue fields (runtime/vision.py reads them) and the per-program guards are typed too."""
    m = load(vision_artifact)
    assert parse_manifest(m, "v").to_json() == m and "preprocess" in m and m["classify"]["labels"] == "labels.txt"
    art = _copy(vision_artifact, tmp_path)
    _forge(art, edit)
    with pytest.raises(WebinferError) as e:
        webinfer.InferenceSession(art)
    assert "\n" not in str(e.value)
    for w in words:
        assert w in str(e.value), str(e.value)
