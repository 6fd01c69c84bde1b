"""Build options and kernel classes: one typed object, recorded in the manifest, that chooses kernels."""

import json

import numpy as np
import pytest
from oprefs import make_model

import webinfer
from webinfer.errors import WebinferError
from webinfer.options import GPU, KERNEL_CLASSES, SOFTWARE, BuildOptions, class_from_json, class_to_json


def test_targets_expand_to_classes():
    assert BuildOptions().classes == ("gpu", "software")
    assert BuildOptions(target="software").classes == ("software",)
    assert BuildOptions(target="gpu").kernel_classes == [GPU]


@pytest.mark.parametrize("bad", [dict(target="fast"), dict(limits="huge"), dict(f16="always"),
                                 dict(target="portable", classes=("nope",))])
def test_bad_options_are_one_line_errors(bad):
    with pytest.raises(WebinferError):
        BuildOptions(**bad)


def test_json_round_trip():
    for opts in (BuildOptions(), BuildOptions(target="gpu", limits="native")):
        assert BuildOptions.from_json(opts.to_json()) == opts
    for k in KERNEL_CLASSES.values():
        assert class_from_json(json.loads(json.dumps(class_to_json(k)))) == k


@pytest.mark.parametrize("target", ["software", "gpu"])
def test_manifest_records_options_and_class(tmp_path, target):
    from onnx import helper

    x = np.ones((33, 40), np.float32)
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], {"x": x}, ["y"],
                       {"w": np.ones((40, 24), np.float32)})
    m = webinfer.build(model, str(tmp_path), target=target)
    assert m["options"]["target"] == target
    assert m["options"]["kernel_classes"][target]["matmul"]["shared"] == (target == "gpu")
    shaders = " ".join((tmp_path / e["file"]).read_text() for e in m["shaders"])
    assert ("var<workgroup>" in shaders) == (target == "gpu")
    assert SOFTWARE.matmul.shared is False


def test_tile_policies():
    from webinfer.options import with_tiles

    assert with_tiles(SOFTWARE, "balanced") == SOFTWARE
    assert with_tiles(SOFTWARE, "startup").matmul == SOFTWARE.matmul_small
    assert with_tiles(SOFTWARE, "throughput").matmul_small is None
    assert with_tiles(GPU, "startup") == GPU  # no small tile declared: unchanged
    assert BuildOptions(tiles="startup").to_json()["kernel_classes"]["software"]["matmul"]["tm"] == 8
    with pytest.raises(WebinferError, match="--tiles"):
        BuildOptions(tiles="fast")
