"""The real-model tolerance rule, shared by the model tests."""

from __future__ import annotations

import numpy as np
import onnx


def assert_close_to_peak(got, ref, what: str, rel: float = 1e-4) -> float:
    """The models' tolerance rule: max abs error <= rel * max abs of the reference output."""
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != onnxruntime {ref.shape}"
    assert got.dtype == ref.dtype, f"{what}: dtype {got.dtype} != onnxruntime {ref.dtype}"
    err = float(np.abs(got.astype(np.float64) - ref).max())
    peak = float(np.abs(ref).max())
    print(f"{what}: max abs err {err:.3g}, max abs output {peak:.3g}, ratio {err / peak:.3g}")
    assert err <= rel * peak, f"{what}: max abs err {err:.3g} > {rel:g} x max abs output {peak:.3g}"
    return err


def assert_data_on_gpu(lowered_path, manifest: dict) -> None:
    """The conformance runner's placement rule on a whole model: only shape arithmetic on the host."""
    from conformance.cases import check_placement

    for program in manifest["programs"]:
        why = check_placement(onnx.load(str(lowered_path)), program["placement"])
        assert why is None, f"{program['class']}: {why}"
