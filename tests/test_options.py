"""Build options and kernel classes: one typed object, recorded in the manifest, that chooses kernels."""

import json

import numpy as np
import pytest
from oprefs import make_model

import webinfer
from webinfer.errors import WebinferError
from webinfer.options import (
    GPU,
    KERNEL_CLASSES,
    SOFTWARE,
    SOFTWARE_SUBGROUPS,
    BuildOptions,
    class_from_json,
    class_to_json,
)


def test_targets_expand_to_classes():
    assert BuildOptions().classes == ("gpu", "software-subgroups", "software")
    # pages (startup tiles) broadcast no rows, which leaves software-subgroups a copy of software: not carried
    assert BuildOptions(tiles="startup").classes == ("gpu", "software")
    assert BuildOptions(target="software-subgroups", tiles="startup").classes == ("software-subgroups",)
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
    # the quantized prefill GEMM: the software class's big tile, the default (quick to compile) one for pages
    assert SOFTWARE.quant_gemm.tm * SOFTWARE.quant_gemm.tn > GPU.quant_gemm.tm * GPU.quant_gemm.tn
    assert with_tiles(SOFTWARE, "startup").quant_gemm == GPU.quant_gemm
    # lavapipe unpacks quantized words faster by shifts, SwiftShader (pages: startup) by the builtins
    assert SOFTWARE.unpack_by_shifts and not with_tiles(SOFTWARE, "startup").unpack_by_shifts
    assert SOFTWARE_SUBGROUPS.subgroup_lanes == 8 and with_tiles(SOFTWARE_SUBGROUPS, "startup").subgroup_lanes == 0
    assert with_tiles(SOFTWARE, "throughput").quant_gemm == SOFTWARE.quant_gemm
    assert BuildOptions(tiles="startup").to_json()["kernel_classes"]["software"]["matmul"]["tm"] == 8
    with pytest.raises(WebinferError, match="--tiles"):
        BuildOptions(tiles="fast")



def _class_shaders(out: str, cls: str) -> dict[str, list[str]]:
    """Kernel family label -> its shaders' WGSL, for a model of every hot family built for class ``cls``: a
    tiled (vec4) MatMul, an f32 decode GEMV (one row), a long-row Softmax, a flash Attention, an implicit-GEMM Conv
    and an int4 decode GEMV."""
    from onnx import TensorProto, helper, numpy_helper

    def f(*shape):
        return np.ones(shape, np.float32)

    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"]), helper.make_node("MatMul", ["x", "w"], ["g"]),
                        helper.make_node("Softmax", ["r"], ["s"]), helper.make_node("Attention", ["q", "kk", "v"], ["t"]),
                        helper.make_node("Conv", ["cx", "cw"], ["c"])],
                       {"a": f(65, 72), "b": f(72, 68), "x": f(1, 600), "r": f(3, 700), "q": f(1, 4, 70, 64),
                        "kk": f(1, 2, 70, 64), "v": f(1, 2, 70, 64), "cx": f(1, 8, 9, 7)},
                       ["y", "g", "s", "t", "c"], {"w": f(600, 40), "cw": f(20, 8, 3, 3)}, opset=23)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "q",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 40])],
                              [numpy_helper.from_array(f(64, 40), "w")])
    texts: dict[str, list[str]] = {}
    for name, proto, quantize in (("f32", model, None),
                                  ("q", helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), "int4")):
        art = f"{out}/{cls}-{name}"
        m = webinfer.build(proto, art, target=cls, quantize=quantize)
        for step in m["programs"][0]["steps"]:
            texts.setdefault(step["label"], []).append(open(f"{art}/{m['shaders'][step['shader']]['file']}").read())
    return texts


@pytest.mark.parametrize("cls", list(KERNEL_CLASSES))
def test_each_class_builds_its_own_variants(tmp_path, cls):
    """The per-class kernel tests (tests/codegen, tests/llm: vs ReferenceEvaluator/onnxruntime/numpy) run what
    each class says it runs: workgroup tiles/reductions under the gpu classes, subgroup reductions in the row
    kernels and quantized GEMVs where a class uses subgroups, f16 tiles in GEMM/conv/attention under gpu-f16,
    dot4I8Packed in the quantized GEMV under gpu-dp4a, int8-activation products (pairs_dot) under software-q8,
    loads shared in subgroups in the matmul, quantized GEMV and serial attention under software-subgroups, and
    none of these in a class that does not use them.
    Where gpu-subgroups/gpu-dp4a use no feature of theirs (GEMM, f32 GEMV, conv, attention), their shaders are
    gpu's, byte for byte: what runs gpu's in Chromium runs theirs; so are software-subgroups' software's."""
    k = KERNEL_CLASSES[cls]
    texts = _class_shaders(str(tmp_path), cls)
    marks = {"workgroup": "var<workgroup>", "subgroups": "enable subgroups;", "f16": "enable f16;",
             "dp4a": "dot4I8Packed(", "q8": "pairs_dot("}
    for family in ("MatMul", "Softmax", "Attention", "Conv", "MatMulQ"):
        wgsl = " ".join(t for label, ts in texts.items() if label.split(":")[1] == family for t in ts)
        uses = {key for key, mark in marks.items() if mark in wgsl}
        assert ("workgroup" in uses) == k.workgroup_memory, (family, uses)
        assert ("f16" in uses) == (k.use_f16 and family in ("MatMul", "Attention", "Conv")), (family, uses)
        broadcasts = bool(k.subgroup_lanes) and family in ("MatMul", "MatMulQ", "Attention")
        assert ("subgroups" in uses) == (k.use_subgroups and family in ("Softmax", "MatMulQ") or broadcasts), (family, uses)
        assert ("dp4a" in uses) == (k.use_dp4a and family == "MatMulQ"), (family, uses)
        assert ("q8" in uses) == (bool(k.q8_gemv) and family == "MatMulQ"), (family, uses)
    if k.workgroup_memory:  # the gpu classes' kernel families (software: matmul, quant_matmul, conv)
        assert {"matmul_tiled:MatMul", "gemv:MatMul", "matmul_tiled:Conv", "gemv:MatMulQ"} <= set(texts), texts.keys()
    if k.use_subgroups and not k.use_f16:
        gpu = _class_shaders(str(tmp_path), "gpu")
        for label in ("matmul_tiled:MatMul", "gemv:MatMul", "matmul_tiled:Conv", "attention:Attention"):
            assert texts[label] == gpu[label], label
    if k.subgroup_lanes:
        software = _class_shaders(str(tmp_path), "software")
        for label in ("quant_matmul:MatMul", "reduce:Softmax", "conv:Conv"):
            assert texts[label] == software[label], label
