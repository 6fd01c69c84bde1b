"""Sin/Cos/Tan cases for the driver-independent trigonometry (codegen/kernels/elementwise_ops.py ``sincos_f``):
the model, its inputs and the check against numpy's float64, shared by the native test
(tests/llm/test_swiftshader_numerics.py) and Chromium's (tests/browser/test_trig_browser.py)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper


def trig_model():
    nodes = [helper.make_node(op, ["x"], [op.lower()]) for op in ("Sin", "Cos", "Tan")]
    g = helper.make_graph(nodes, "trig", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, ["n"]) for o in ("sin", "cos", "tan")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def trig_inputs() -> np.ndarray:
    """Angles from a rotary table's range (position x frequency, up to 4096) and beyond, exact quarter turns'
    neighbours, and the special values."""
    rng = np.random.default_rng(0)
    parts = [rng.uniform(-lim, lim, 4096) for lim in (3.2, 40.0, 4096.0, 65536.0)]
    quarter = np.float32(np.pi / 2) * np.arange(-40, 41, dtype=np.float32)
    parts += [quarter, np.nextafter(quarter, np.float32(np.inf)), [0.0, -0.0, 1e-30, -1e-8]]
    return np.concatenate(parts).astype(np.float32)


def check_trig(x: np.ndarray, outs: dict) -> None:
    """Within 3 ulp of the float64 result (an absolute floor of 2 ulp of 1 where it crosses zero), and tan
    within 4e-7 relative; ±0 keeps its sign through sin and tan."""
    x64 = x.astype(np.float64)
    for name, ref in (("sin", np.sin), ("cos", np.cos)):
        want, got = ref(x64), outs[name].astype(np.float64)
        err = np.abs(got - want)
        bound = 3 * np.spacing(np.abs(want).astype(np.float32)).astype(np.float64) + 2.4e-7
        worst = int(np.argmax(err - bound))
        assert (err <= bound).all(), f"{name}({x[worst]!r}) = {got[worst]!r}, want {want[worst]!r}"
    want, got = np.tan(x64), outs["tan"].astype(np.float64)
    rel = np.abs(got - want) / np.maximum(np.abs(want), 1e-30)
    worst = int(np.argmax(rel))
    assert rel[worst] <= 4e-7, f"tan({x[worst]!r}) = {got[worst]!r}, want {want[worst]!r}"
    zeros = x == 0
    assert (np.signbit(outs["sin"][zeros]) == np.signbit(x[zeros])).all()
    assert (np.signbit(outs["tan"][zeros]) == np.signbit(x[zeros])).all()
