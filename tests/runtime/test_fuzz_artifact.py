"""Fuzz the artifact loader (issue 15): 2,100 seeded mutations of a small artifact's manifest and files.

Every outcome must be a one-line WebinferError (what the CLI prints as ``webinfer: error: ...``) or the exact
output of the unmutated artifact's program that ran (bit for bit; the clean outputs themselves match
onnxruntime): never a different output, a traceback-worthy exception, or a multi-line error. The mutation
kinds are described in artifact_fuzz.py; the counts per kind and outcome are printed (``pytest -s``).
"""

from __future__ import annotations

import os
import random
import shutil
import time
from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from artifact_fuzz import MUTATORS
from onnx import TensorProto, helper, numpy_helper

from webinfer.build import build
from webinfer.errors import WebinferError
from webinfer.runtime.inference import InferenceSession

SEED = 15
PER_KIND = int(os.environ.get("FUZZ_PER_KIND", 175))  # x 12 kinds = 2,100 mutations
X = np.linspace(-2, 2, 24, dtype=np.float32).reshape(3, 8)


def _model() -> onnx.ModelProto:
    """x[n, 8] @ W[8, 8] + b -> Relu -> Softmax, and a reshaped view of the matmul: weights, a GEMV/GEMM pair
    (eq/ne conditions), an epilogue, a row kernel, a view, two outputs."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")
    shape = numpy_helper.from_array(np.array([-1, 4, 2], np.int64), "shape")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["h"]),
             helper.make_node("Relu", ["h"], ["r"]), helper.make_node("Softmax", ["r"], ["y"], axis=-1),
             helper.make_node("Reshape", ["h", "shape"], ["z"])]
    g = helper.make_graph(nodes, "fuzz", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], [w, b, shape])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    model = _model()
    art = str(tmp_path_factory.mktemp("fuzz") / "clean.wi")
    manifest = build(model, art)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": X})
    outputs = {}
    for p in manifest["programs"]:  # the exact outputs of each program, which must match onnxruntime
        got = InferenceSession(art, kernel_class=p["class"]).run(["y", "z"], {"x": X})
        for r, g in zip(ref, got):
            np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)
        outputs[p["class"]] = got
    return art, outputs


def _outcome(art: str, outputs: dict) -> str:
    try:
        session = InferenceSession(art)
        got = session.run(["y", "z"], {"x": X})
    except WebinferError as e:
        return "error" if "\n" not in str(e) and str(e) else f"MULTI-LINE ERROR: {e!r}"
    except Exception as e:
        return f"INTERNAL ERROR: {type(e).__name__}: {str(e)[:200]}"
    want = outputs[session.choice.kernel_class]
    same = all(g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes() for g, w in zip(got, want))
    return "exact" if same else "WRONG OUTPUT"


def test_fuzz_manifest_and_files(clean, tmp_path, capsys):
    src, outputs = clean
    rng = random.Random(SEED)
    counts: Counter = Counter()
    failures = []
    t0 = time.perf_counter()
    for kind, mutate in MUTATORS.items():
        for i in range(PER_KIND):
            art = str(tmp_path / f"{kind}-{i}.wi")
            shutil.copytree(src, art)
            what = mutate(rng, art)
            outcome = _outcome(art, outputs)
            counts[kind, outcome.split(":")[0]] += 1
            if outcome not in ("error", "exact"):
                failures.append(f"{kind} #{i} ({what}): {outcome}")
            shutil.rmtree(art)
    seconds = time.perf_counter() - t0
    with capsys.disabled():
        print(f"\nartifact fuzz: {sum(counts.values())} mutations in {seconds:.1f} s (seed {SEED})")
        for kind in MUTATORS:
            row = {o: n for (k, o), n in counts.items() if k == kind}
            print(f"  {kind:17s} " + ", ".join(f"{o} {n}" for o, n in sorted(row.items())))
    assert not failures, f"{len(failures)} bad outcomes:\n" + "\n".join(failures[:40])
    assert sum(counts.values()) >= 2000
    for d in os.listdir(tmp_path):
        assert not d.endswith(".wi")
