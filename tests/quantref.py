"""Independent references for the packed weight formats (graph/quantize.py): the layouts unpacked bit by bit
as documented, and the dp4a GEMV's arithmetic (int8 activations) modelled in numpy."""

from __future__ import annotations

import numpy as np
import onnx


def unpack_reference(words: np.ndarray, params: np.ndarray, fmt: str, k: int) -> np.ndarray:
    """[N, K] float64 weights from the packed words, following the documented layout literally."""
    n, nw = words.shape
    if fmt == "f16":  # value 2w + j in bits 16j.. of word w, an IEEE half
        halves = [((words >> np.uint32(16 * j)) & np.uint32(0xFFFF)).astype(np.uint16) for j in (0, 1)]
        return np.stack(halves, axis=-1).reshape(n, 2 * nw).view(np.float16)[:, :k].astype(np.float64)
    out = np.zeros((n, nw * (4 if fmt == "int8" else 8)))
    for w in range(nw):
        word = words[:, w].astype(np.uint64)
        if fmt == "int8":
            for j in range(4):
                byte = ((word >> np.uint64(8 * j)) & np.uint64(255)).astype(np.int64)
                q = np.where(byte > 127, byte - 256, byte)
                kk = 4 * w + j
                out[:, kk] = q / 127.0 * params[:, kk // 32]
        else:
            for j in range(8):
                q = ((word >> np.uint64(8 * (j % 4) + 4 * (j // 4))) & np.uint64(15)).astype(np.float64)
                kk = 8 * w + j
                out[:, kk] = q / 255.0 * params[:, kk // 32, 0] + params[:, kk // 32, 1]
    return out[:, :k]


def dp4a_reference(x: np.ndarray, ref_w: np.ndarray, params: np.ndarray, fmt: str) -> np.ndarray:
    """What the dp4a GEMV computes, in numpy: x rounded (half to even) to int8 per block of 32 at scale
    max|x| / 127; int4's per-block minimum multiplies the exact block sum of x (its own term)."""
    k = x.size
    kp = -(-k // 32) * 32
    xb = np.zeros(kp, np.float32)
    xb[:k] = x
    xb = xb.reshape(-1, 32)
    amax = np.abs(xb).max(axis=1, keepdims=True)
    inv = np.where(amax > 0, np.float32(127.0) / np.where(amax > 0, amax, 1), 0).astype(np.float32)
    xq = (np.round(xb * inv) * (amax / np.float32(127.0))).reshape(-1)[:k].astype(np.float64)
    if fmt == "int8":
        return xq @ ref_w
    mins = np.repeat(params[:, :, 1], 32, axis=1)[:, :k].T.astype(np.float64)  # [K, N] block minimum
    return xq @ (ref_w - mins) + x.astype(np.float64) @ mins


def f16_weight_names(model: onnx.ModelProto) -> set[str]:
    """The initializers ``--quantize f16`` stores as float16: MatMul/Gemm B (also through a Transpose) and
    embedding tables of at least 2^16 values."""
    producers = {o: n for n in model.graph.node for o in n.output}
    inits = {i.name: i for i in model.graph.initializer}
    names = set()
    for n in model.graph.node:
        picks = [n.input[1]] if n.op_type in ("MatMul", "Gemm") else [n.input[0]] if n.op_type == "Gather" else []
        for name in picks:
            p = producers.get(name)
            if p is not None and p.op_type == "Transpose":
                name = p.input[0]
            init = inits.get(name)
            if init is None or len(init.dims) != 2 or init.data_type != onnx.TensorProto.FLOAT:
                continue
            if n.op_type != "Gather" or int(np.prod(init.dims)) >= 1 << 16:
                names.add(name)
    return names


def stored_weights_reference(src: str, out_dir, fmt: str = "int4") -> str:
    """``out_dir``/model.onnx: ``src`` with the weights a ``--quantize fmt`` build stores, as f32 (f16: numpy's
    rounding; int4: MatMul weights int4, embedding tables (and a head tied to one) int8, packed by
    graph/quantize.py and unpacked here independently), so onnxruntime on it is the build's reference."""
    from pathlib import Path

    from webinfer.graph.quantize import GATHER_MIN_ELEMENTS, quantize_nk

    model = onnx.load(str(src))
    gathered = {n.input[0] for n in model.graph.node if n.op_type == "Gather"}
    names = f16_weight_names(model)
    for init in model.graph.initializer:
        if init.name not in names:
            continue
        w = onnx.numpy_helper.to_array(init)
        if fmt == "f16":
            new = w.astype(np.float16).astype(np.float32)
        elif init.name in gathered and w.size >= GATHER_MIN_ELEMENTS:
            new = unpack_reference(*quantize_nk(w, "int8"), "int8", w.shape[1])
        else:  # a MatMul B [K, N]: N-major
            new = unpack_reference(*quantize_nk(np.ascontiguousarray(w.T), fmt), fmt, w.shape[0]).T
        init.CopyFrom(onnx.numpy_helper.from_array(np.ascontiguousarray(new, np.float32), init.name))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(out / "model.onnx"), save_as_external_data=True, location="model.onnx.data")
    return str(out / "model.onnx")
