"""The runtime is standard-library Python (it must run in Pyodide, which has no numpy/onnx/jinja2 offline):
import it and run a built artifact in a subprocess where those imports fail."""

import base64
import json
import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import webinfer
from webinfer.build import build

BLOCKED = ["numpy", "onnx", "jinja2", "onnx_ir", "onnxscript", "onnxruntime", "torch"]

CHILD = r'''
import base64, importlib, json, pkgutil, sys
from array import array

BLOCKED = set(sys.argv[2].split(","))
attempts = []


class Block:
    """Make every import of a blocked package (and its submodules) fail, as in Pyodide."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            attempts.append(name)
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by test_stdlib_only)")
        return None


sys.meta_path.insert(0, Block())
for mod in list(sys.modules):
    if mod.split(".")[0] in BLOCKED:
        del sys.modules[mod]

import webinfer.format
import webinfer.llm
import webinfer.runtime
for pkg in (webinfer.runtime, webinfer.llm, webinfer.format):  # the run side (tests/test_imports.py has its list)
    for m in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"{pkg.__name__}.{m.name}")
for m in ("webinfer.artifact", "webinfer.page", "webinfer.dims", "webinfer.dtypes", "webinfer.errors"):
    importlib.import_module(m)

from webinfer.runtime.inference import InferenceSession
from webinfer.runtime.tensor import HostTensor

spec = json.loads(sys.stdin.read())
x = HostTensor("float32", spec["x_shape"], base64.b64decode(spec["x"]))
k = memoryview(array("q", spec["k"])).cast("B").cast("q", [len(spec["k"])])
session = InferenceSession(sys.argv[1])
names = [o.name for o in session.get_outputs()]
results = session.run(None, {"x": x, "k": k})
out = {n: {"type": type(r).__name__, "dtype": r.dtype, "shape": list(r.shape), "b64": base64.b64encode(r.data).decode()}
       for n, r in zip(names, results)}
loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
print(json.dumps({"outputs": out, "loaded": loaded, "attempts": sorted(set(attempts))}))
'''


def model():
    rng = np.random.default_rng(3)
    nodes = [helper.make_node("Add", ["x", "w"], ["a"]), helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Mul", ["r", "x"], ["y"]), helper.make_node("Mul", ["k", "k2"], ["z"])]
    graph = helper.make_graph(
        nodes, "stdlib",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6]),
         helper.make_tensor_value_info("k", TensorProto.INT64, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 6]),
         helper.make_tensor_value_info("z", TensorProto.INT64, [4])],
        [numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "w"),
         numpy_helper.from_array(np.array([2, -3, 5, 0], np.int64), "k2")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_runtime_runs_without_numpy_onnx_jinja2(tmp_path):
    m = model()
    art = str(tmp_path / "m.wi")
    build(m, art)
    x = np.random.default_rng(4).standard_normal((5, 6)).astype(np.float32)
    k = np.array([7, -1, 123456, 9], np.int64)
    expected = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x, "k": k})

    spec = {"x_shape": list(x.shape), "x": base64.b64encode(x.tobytes()).decode(), "k": k.tolist()}
    root = os.path.dirname(os.path.dirname(os.path.abspath(webinfer.__file__)))
    proc = subprocess.run([sys.executable, "-c", CHILD, art, ",".join(BLOCKED)], input=json.dumps(spec),
                          capture_output=True, text=True, timeout=300, cwd=root)
    assert proc.returncode == 0, f"runtime failed without numpy/onnx/jinja2:\n{proc.stderr[-4000:]}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["loaded"] == [], f"blocked packages were imported anyway: {result['loaded']}"
    for (name, got), want in zip(result["outputs"].items(), expected):
        assert got["type"] == "HostTensor", "without numpy the session returns HostTensors"
        arr = np.frombuffer(base64.b64decode(got["b64"]), dtype=got["dtype"]).reshape(got["shape"])
        assert arr.dtype == want.dtype and arr.shape == want.shape
        np.testing.assert_allclose(arr, want, rtol=1e-6, atol=1e-6, err_msg=name)
