"""Program selection (runtime/select.py): which kernel class a device runs, and why."""

from types import SimpleNamespace

import numpy as np
import pytest
from onnx import helper
from oprefs import make_model

import webinfer
from webinfer.errors import WebinferError
from webinfer.format.schema import Program, Requires
from webinfer.runtime.select import AdapterFacts, adapter_type, choose_program


def _program(cls: str, adapter_types: list, features=(), limits=None) -> Program:
    return Program(cls, tuple(adapter_types), Requires(tuple(features), limits or {}), steps=(), outputs=(),
                   weights=(), shaders=0, control=(), guards=(), placement=())


# (the typed manifest, format/schema.py: choose_program reads only its programs)
PROGRAMS = SimpleNamespace(programs=(
    _program("gpu-f16", ["integrated", "discrete"], ["shader-f16"]),
    _program("gpu", ["integrated", "discrete", "unknown"]),
    _program("software", ["cpu"], limits={"max-compute-invocations-per-workgroup": 256}),
))


@pytest.mark.parametrize("reported,fallback,text,want", [
    ("CPU", False, "llvmpipe (LLVM 15)", "cpu"), ("DiscreteGPU", False, "NVIDIA H100", "discrete"),
    ("IntegratedGPU", False, "Intel UHD", "integrated"), (None, True, "google", "cpu"),
    (None, False, "google swiftshader", "cpu"), (None, False, "nvidia ampere", "unknown"),
    ("Unknown", False, "Microsoft Basic Render Driver", "cpu"),
])
def test_adapter_type(reported, fallback, text, want):
    assert adapter_type(reported, fallback, text) == want


@pytest.mark.parametrize("facts,want", [
    (AdapterFacts("cpu", features=frozenset({"shader-f16"})), "software"),
    (AdapterFacts("discrete", features=frozenset({"shader-f16"})), "gpu-f16"),
    (AdapterFacts("discrete"), "gpu"),  # no shader-f16: the f16 program cannot run
    (AdapterFacts("unknown"), "gpu"),  # a browser's real GPU does not say integrated or discrete
    (AdapterFacts("virtual"), "gpu"),  # tuned for nobody here: the first runnable one
    (AdapterFacts("cpu", limits={"max-compute-invocations-per-workgroup": 128}), "gpu"),
])
def test_choose(facts, want):
    choice = choose_program(PROGRAMS, facts)
    assert choice.kernel_class == want
    assert choice.why


def test_forced_and_impossible():
    assert choose_program(PROGRAMS, AdapterFacts("cpu"), forced="gpu").kernel_class == "gpu"
    with pytest.raises(WebinferError, match="needs feature shader-f16"):
        choose_program(PROGRAMS, AdapterFacts("cpu"), forced="gpu-f16")
    with pytest.raises(WebinferError, match="not in this artifact"):
        choose_program(PROGRAMS, AdapterFacts("cpu"), forced="tpu")
    only_f16 = SimpleNamespace(programs=PROGRAMS.programs[:1])
    with pytest.raises(WebinferError, match="no program of this artifact runs"):
        choose_program(only_f16, AdapterFacts("discrete"))


@pytest.fixture(scope="module")
def portable(tmp_path_factory):
    """A matmul (the class changes its kernel) plus a weight both classes share."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((37, 24)).astype(np.float32)
    w = rng.standard_normal((24, 20)).astype(np.float32)
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])],
                       {"x": x}, ["y"], {"w": w})
    out = tmp_path_factory.mktemp("portable") / "p.wi"
    m = webinfer.build(model, str(out))
    return out, m, x, np.maximum(x @ w, 0)


def test_portable_artifact_shares_tensors(portable):
    _, m, _, _ = portable
    assert [p["class"] for p in m["programs"]] == ["gpu", "software-subgroups", "software"]
    assert m["programs"][0]["weights"] == m["programs"][1]["weights"] == m["programs"][2]["weights"]  # stored once
    assert sum(t["kind"] == "weight" for t in m["tensors"]) == 1
    assert m["options"]["target"] == "portable"


@pytest.mark.parametrize("forced,want", [(None, "software-subgroups"), ("software", "software"), ("gpu", "gpu")])
def test_portable_runs_each_class(portable, forced, want):
    """lavapipe is a CPU adapter with subgroups: software-subgroups by default; the software and gpu programs
    still run correctly on it."""
    path, _, x, ref = portable
    sess = webinfer.InferenceSession(str(path), kernel_class=forced)
    assert sess.choice.kernel_class == want
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], ref, rtol=1e-4, atol=1e-4)
