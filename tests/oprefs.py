"""Test helper: run a one-node (or small) ONNX model through webinfer and through
onnx.reference.ReferenceEvaluator, and compare. Every op test uses this: the reference is ONNX's, never
webinfer itself."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator

from webinfer.backend import WebinferRep

RTOL, ATOL = 1e-4, 1e-5
# Kernel classes every kernel test can run under (options.KERNEL_CLASSES): parametrize a test with
# ``@pytest.mark.parametrize("target", TARGETS)`` and pass ``target=`` to check_node/check_model.
TARGETS = ("software", "gpu", "gpu-subgroups", "gpu-f16", "gpu-dp4a")
# Classes with f16 arithmetic (f16 products, f32 sums) or int8 activations (dp4a) are compared at f16's
# tolerance: float outputs within F16_TOL (relative, and absolute scaled like the caller's) of the reference.
F16_TOL = 1e-2


def tolerance(target, rtol: float, atol: float) -> tuple[float, float]:
    """(rtol, atol) for a kernel class: f16 classes get max(rtol, F16_TOL) and atol scaled to F16_TOL's
    ratio to the default rtol (an f16 product errs ~1e-3 relative where f32 errs ~1e-7)."""
    from webinfer.options import BuildOptions

    kclass = BuildOptions(target=target).kernel_classes[0] if isinstance(target, str) else target.kernel_classes[0]
    if kclass.use_f16 or kclass.use_dp4a:
        return max(rtol, F16_TOL), max(atol * F16_TOL / RTOL, F16_TOL)
    return rtol, atol


def make_model(nodes, inputs: dict, outputs: list[str], initializers: dict | None = None, opset: int = 18):
    """inputs: name -> numpy array (its dtype and shape are declared); outputs: names (types inferred)."""
    g = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for n, v in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [onnx.numpy_helper.from_array(np.asarray(v), n) for n, v in (initializers or {}).items()],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def check_model(model, feeds: dict, rtol: float = RTOL, atol: float = ATOL, target: str = "software"):
    """Run through webinfer (built for kernel class ``target``) and ReferenceEvaluator; assert equal within
    tolerance; return both."""
    ref = ReferenceEvaluator(model).run(None, feeds)
    rtol, atol = tolerance(target, rtol, atol)
    rep = WebinferRep(model, target=target)
    got = rep.run(feeds)
    assert len(got) == len(ref)
    for r, g in zip(ref, got):
        r = np.asarray(r)
        assert g.shape == r.shape, f"shape {g.shape} != reference {r.shape}"
        assert g.dtype == r.dtype, f"dtype {g.dtype} != reference {r.dtype}"
        if r.dtype.kind in "fc":
            np.testing.assert_allclose(g, r, rtol=rtol, atol=atol)
        elif "float" in r.dtype.name:  # ml_dtypes' bfloat16/float8/float4 (numpy kind 'V'): NaNs equal
            np.testing.assert_allclose(g.astype(np.float32), r.astype(np.float32), rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, r)
    gpu_nodes = [p for p in rep.placement if p["where"] == "gpu"]
    return ref, got, rep.placement, gpu_nodes


def check_node(op: str, feeds: dict, n_outputs: int = 1, initializers: dict | None = None, opset: int = 18,
               rtol: float = RTOL, atol: float = ATOL, target: str = "software", **attrs):
    """One node whose inputs are ``feeds`` (graph inputs) then ``initializers`` (constants)."""
    names = list(feeds) + list(initializers or {})
    outs = [f"y{i}" for i in range(n_outputs)]
    model = make_model([helper.make_node(op, names, outs, **attrs)], feeds, outs, initializers, opset)
    return check_model(model, feeds, rtol, atol, target=target)


def check_shapes(model, make_feeds, sizes, rtol: float = RTOL, atol: float = ATOL) -> WebinferRep:
    """Build ``model`` (with symbolic input dims) once and run it at each of ``sizes``:
    ``make_feeds(size)`` gives the feeds; every run is compared with ReferenceEvaluator."""
    rep = WebinferRep(model)
    ref = ReferenceEvaluator(model)
    for size in sizes:
        feeds = make_feeds(size)
        want = ref.run(None, feeds)
        got = rep.run(feeds)
        for r, g in zip(want, got):
            r = np.asarray(r)
            assert g.shape == r.shape, f"at {size}: shape {g.shape} != reference {r.shape}"
            np.testing.assert_allclose(g, r, rtol=rtol, atol=atol, err_msg=f"at {size}")
    assert len(rep._sessions) == 1, "built more than once"
    return rep
