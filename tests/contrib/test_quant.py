"""MatMulNBits and GatherBlockQuantized (graph/contrib/quant.py) against onnxruntime: the packed bytes are used
as they are, on the software kernels (register GEMV/GEMM) and the gpu ones (cooperative GEMV, tiled GEMM)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

import webinfer

from .ort_ref import MS, check_ort, contrib_model

RNG = np.random.default_rng(1)


def _nbits_weights(n: int, k: int, bits: int, block: int, zp: str):
    blocks = -(-k // block)
    b = RNG.integers(0, 256, (n, blocks, block * bits // 8), dtype=np.uint8)
    scales = (RNG.random((n, blocks)) * 0.1 + 0.01).astype(np.float32)
    inits = {"B": b, "scales": scales}
    if zp == "packed":
        per_byte = 8 // bits
        inits["zp"] = RNG.integers(0, 256, (n, -(-blocks // per_byte)), dtype=np.uint8)
    elif zp == "float":
        inits["zp"] = (RNG.random((n, blocks)) * 2 ** bits).astype(np.float32)
    return inits


CASES = [  # (rows, k, n, bits, block, zero points, bias)
    (1, 64, 40, 4, 32, "none", False),
    (5, 64, 40, 4, 32, "packed", True),
    (1, 96, 24, 4, 64, "packed", False),
    (7, 80, 36, 4, 32, "none", False),      # K padded to whole blocks
    (3, 256, 16, 4, 128, "float", False),
    (1, 128, 20, 8, 32, "none", True),
    (6, 72, 20, 8, 64, "packed", False),
]


@pytest.mark.parametrize("target", ["software", "software-subgroups", "gpu"])
@pytest.mark.parametrize("rows,k,n,bits,block,zp,bias", CASES)
def test_matmul_nbits(rows, k, n, bits, block, zp, bias, target):
    inits = _nbits_weights(n, k, bits, block, zp)
    names = ["a", "B", "scales", "zp" if "zp" in inits else ""]
    if bias:
        inits["bias"] = RNG.standard_normal(n).astype(np.float32)
        names += ["", "bias"]
    node = helper.make_node("MatMulNBits", names, ["y"], domain=MS, K=k, N=n, bits=bits, block_size=block)
    a = RNG.standard_normal((1, rows, k)).astype(np.float32)
    check_ort(contrib_model([node], {"a": a}, ["y"], inits), {"a": a}, rtol=1e-4, atol=1e-4, target=target)


def test_matmul_nbits_weights_stay_packed(tmp_path):
    """The artifact stores the model's bytes as they are (no f32 copy of the weight anywhere)."""
    inits = _nbits_weights(64, 128, 4, 32, "none")
    node = helper.make_node("MatMulNBits", ["a", "B", "scales"], ["y"], domain=MS, K=128, N=64, bits=4, block_size=32)
    model = contrib_model([node], {"a": np.zeros((1, 128), np.float32)}, ["y"], inits)
    m = webinfer.build(model, str(tmp_path / "a"))
    weights = sum(s["bytes"] for s in m["shards"])
    assert weights == inits["B"].nbytes + 64 * 4 * 2 * 4  # the bytes + (scale, offset) per block of 32
    blob = b"".join(p.read_bytes() for p in sorted((tmp_path / "a" / "weights").glob("*")))
    assert inits["B"].tobytes() in blob


@pytest.mark.parametrize("bits,block,zp", [(4, 32, False), (4, 64, True), (8, 32, True)])
def test_gather_block_quantized(bits, block, zp):
    vocab, k = 50, 128
    data = RNG.integers(0, 256, (vocab, k * bits // 8), dtype=np.uint8)
    inits = {"data": data, "scales": (RNG.random((vocab, k // block)) * 0.1).astype(np.float32)}
    if zp:
        inits["zp"] = RNG.integers(0, 256, (vocab, k // block * bits // 8 or 1), dtype=np.uint8)
    ids = RNG.integers(0, vocab, (2, 9)).astype(np.int64)
    node = helper.make_node("GatherBlockQuantized", ["data", "ids", "scales"] + (["zp"] if zp else []), ["y"],
                            domain=MS, bits=bits, block_size=block, gather_axis=0, quantize_axis=1)
    check_ort(contrib_model([node], {"ids": ids}, ["y"], inits), {"ids": ids})


def test_gather_block_quantized_int4_data():
    """int4-typed tables (signed, default zero point 0) are packed into bytes losslessly."""
    vocab, k = 20, 64
    q = RNG.integers(-8, 8, (vocab, k)).astype(np.int8)
    data = helper.make_tensor("data", onnx.TensorProto.INT4, [vocab, k], q.reshape(-1).tolist())
    scales = (RNG.random((vocab, k // 32)) * 0.1).astype(np.float32)
    ids = RNG.integers(0, vocab, (1, 7)).astype(np.int64)
    node = helper.make_node("GatherBlockQuantized", ["data", "ids", "scales"], ["y"], domain=MS, bits=4,
                            block_size=32, gather_axis=0, quantize_axis=1)
    model = contrib_model([node], {"ids": ids}, ["y"], {"scales": scales})
    model.graph.initializer.append(data)
    check_ort(model, {"ids": ids})


def test_unsupported_forms_are_named(tmp_path):
    inits = _nbits_weights(8, 32, 4, 16, "none")
    node = helper.make_node("MatMulNBits", ["a", "B", "scales"], ["y"], name="mm", domain=MS, K=32, N=8, bits=4,
                            block_size=16)
    model = contrib_model([node], {"a": np.zeros((1, 32), np.float32)}, ["y"], inits)
    with pytest.raises(webinfer.WebinferError, match="com.microsoft.MatMulNBits \\(node 'mm'\\): block_size 16"):
        webinfer.build(model, str(tmp_path / "a"))
