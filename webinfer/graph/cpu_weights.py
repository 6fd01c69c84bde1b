"""Smaller weights for the CPU path's model (``build --cpu``), as standard ONNX that onnxruntime (natively) and
onnxruntime-web's wasm backend turn back into float32 initializers when the session is made (constant folding):
a smaller download, and the float32 kernels' speed once loaded.

- ``int4``: each MatMul weight (an initializer read only as a MatMul's B, or through a Transpose into one) as
  ``DequantizeLinear`` (opset 21) of 4-bit codes in blocks of 32 along the axis its dot products reduce over,
  with a float32 scale and a 4-bit zero point per block (about 5.1 bits a weight); embedding tables (and a
  head tied to one, stored once) the same at 8 bits (block_axes says why). onnxruntime keeps DequantizeLinear
  unfolded for its QDQ fusions unless the session sets ``session.disable_quant_qdq``: SESSION_CONFIG, which the
  CPU path's sessions (site/cpu.mjs, runtime/cpu.py) set. onnxruntime's own int4 form, ``MatMulNBits``, was
  measured first: onnxruntime-web 1.30's wasm build has no 4-bit kernels and dequantizes every weight on every
  call (SmolLM2-135M: 3.8 s a decoded token against 65 ms in float32, same process); a fusion of
  DequantizeLinear into MatMul would make the same kernel, which the same setting turns off.
- ``int8``: the same blocks at 8 bits everywhere (about 9 bits a weight): for encoders, where 4 bits move the
  outputs too far; all-MiniLM-L6-v2 (90 -> 26 MB): mean-pooled outputs keep cosine >= 0.9996 with the float32 model's on
  real sentences.
- ``f16``: float initializers stored as float16, read through a Cast (all-MiniLM-L6-v2's sentence embeddings:
  cosine >= 0.99999 with the float32 model's). Dynamic int8 (MatMulInteger) and onnxruntime's int4 were tried
  on that encoder and left out: cosine 0.76 and 0.82 on real sentences.
"""

from __future__ import annotations

import numpy as np

from ..errors import WebinferError

FORMATS = ("f32", "f16", "int8", "int4")
BLOCK = 32
MIN_ELEMENTS = 1024  # smaller initializers (norm weights, biases, shape constants) stay as they are
DQ_OPSET = 21  # DequantizeLinear's block_size and 4-bit types
SESSION_CONFIG = {"session.disable_quant_qdq": "1"}  # (fold DequantizeLinear into float32 weights)


def quantize_cpu_model(proto, weights: str):
    """``proto`` (onnx.ModelProto) with its weights stored as ``weights`` (FORMATS); returns a new proto (or
    ``proto`` itself for f32)."""
    if weights not in FORMATS:
        raise WebinferError(f"CPU model weights {weights!r}: choose from {', '.join(FORMATS)}")
    if weights == "f32":
        return proto
    import onnx

    model = onnx.ModelProto()
    model.CopyFrom(proto)
    if weights in ("int4", "int8"):
        _blockwise(model, 8 if weights == "int8" else None)
    else:
        _f16(model.graph)
    return model


def block_axes(graph) -> dict[str, tuple[int, int]]:
    """{initializer: (the axis its blocks run along, bits)} for the 2-D float initializers every reader of which
    is a MatMul's B (axis 0), a Transpose [1, 0] read only as a MatMul's B (axis 1) or a Gather's table on axis 0
    (axis 1), all its readers agreeing on the axis. 4 bits, but 8 for a table a Gather reads (an embedding, and
    a head tied to it): at 4 bits, SmolLM2-135M's first answer token (a 0.08 logit near-tie) flipped."""
    from onnx import TensorProto

    inits = {i.name: i for i in graph.initializer
             if i.data_type == TensorProto.FLOAT and len(i.dims) == 2 and int(np.prod(i.dims)) >= MIN_ELEMENTS}
    readers: dict[str, list] = {}
    for node in graph.node:
        for k, name in enumerate(node.input):
            readers.setdefault(name, []).append((node, k))
    outputs = {o.name for o in graph.output} | {i.name for i in graph.input}  # (an old IR's inputs name initializers)

    def axis(node, k) -> int | None:
        attrs = {a.name: a for a in node.attribute}
        if node.domain not in ("", "ai.onnx"):
            return None
        if node.op_type == "MatMul" and k == 1:
            return 0
        if node.op_type == "Gather" and k == 0 and ("axis" not in attrs or attrs["axis"].i == 0):
            return 1
        if node.op_type == "Transpose" and list(attrs["perm"].ints if "perm" in attrs else [1, 0]) == [1, 0]:
            after = readers.get(node.output[0], [])
            if after and node.output[0] not in outputs and all(n.op_type == "MatMul" and i == 1 and
                                                               n.domain in ("", "ai.onnx") for n, i in after):
                return 1
        return None

    out = {}
    for name in inits:
        axes = {axis(n, k) for n, k in readers.get(name, [])}
        if name not in outputs and len(axes) == 1 and None not in axes:
            gathered = any(n.op_type == "Gather" for n, _ in readers[name])
            out[name] = (axes.pop(), 8 if gathered else 4)
    return out


def quantize_blocks(w: np.ndarray, axis: int, bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """w float32 -> (codes uint8 as w, scale float32, zero point uint8), blocks of BLOCK along ``axis`` (scale
    and zero point: that axis ceil(n / BLOCK) long), as DequantizeLinear reads them: w ~ (code - zero) * scale.
    Each block's range includes 0 (the zero point is a code)."""
    wt = np.moveaxis(w, axis, -1)
    n = wt.shape[-1]
    g = -(-n // BLOCK)
    if g * BLOCK != n:
        wt = np.concatenate([wt, np.zeros(wt.shape[:-1] + (g * BLOCK - n,), np.float32)], -1)
    b = wt.reshape(wt.shape[:-1] + (g, BLOCK))
    top = (1 << bits) - 1
    lo, hi = np.minimum(b.min(-1, keepdims=True), 0), np.maximum(b.max(-1, keepdims=True), 0)
    scale = ((hi - lo) / top).astype(np.float32)
    scale = np.where(scale > 0, scale, np.float32(1))
    zero = np.clip(np.rint(-lo / scale), 0, top)
    codes = np.clip(np.rint(b / scale) + zero, 0, top).astype(np.uint8).reshape(b.shape[:-2] + (g * BLOCK,))[..., :n]
    return (np.moveaxis(codes, -1, axis), np.moveaxis(scale[..., 0], -1, axis),
            np.moveaxis(zero[..., 0].astype(np.uint8), -1, axis))


def _packed(codes: np.ndarray, name: str, bits: int):
    """A UINT4 (two codes a byte, the first in the low nibble) or UINT8 initializer."""
    from onnx import TensorProto, helper, numpy_helper

    if bits == 8:
        return numpy_helper.from_array(codes, name)
    flat = codes.reshape(-1)
    if flat.size % 2:
        flat = np.concatenate([flat, np.zeros(1, np.uint8)])
    return helper.make_tensor(name, TensorProto.UINT4, codes.shape, (flat[0::2] | (flat[1::2] << 4)).tobytes(),
                              raw=True)


def _at_dq_opset(model) -> None:
    """The model at opset >= DQ_OPSET and IR >= 10 (4-bit types), converted by onnx where it is older."""
    from onnx import version_converter

    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    if opset < DQ_OPSET:
        try:
            converted = version_converter.convert_version(model, DQ_OPSET)
        except Exception as e:  # (the converter raises several types)
            raise WebinferError(f"the CPU model's blockwise weights need opset {DQ_OPSET}: cannot convert the model "
                                f"from opset {opset} ({str(e).splitlines()[0]}); build with --cpu-weights f32") from None
        model.CopyFrom(converted)
    model.ir_version = max(model.ir_version, 10)


def _blockwise(model, bits: int | None) -> None:
    """Every blockable weight (block_axes) as DequantizeLinear of ``bits``-bit codes (None: block_axes' choice,
    4 bits for MatMul weights and 8 for tables)."""
    from onnx import helper, numpy_helper

    axes = {name: (along, bits or b) for name, (along, b) in block_axes(model.graph).items()}
    if not axes:
        return
    _at_dq_opset(model)
    graph = model.graph  # (after the conversion, which replaces it)
    made, inits = [], []
    for init in graph.initializer:
        if init.name not in axes:
            inits.append(init)
            continue
        along, bits = axes[init.name]
        codes, scale, zero = quantize_blocks(numpy_helper.to_array(init), along, bits)
        name = init.name
        inits += [_packed(codes, f"{name}_q{bits}", bits), numpy_helper.from_array(scale, f"{name}_scale"),
                  _packed(zero, f"{name}_zero", bits)]
        made.append(helper.make_node("DequantizeLinear", [f"{name}_q{bits}", f"{name}_scale", f"{name}_zero"],
                                     [name], name=f"{name}_dequantize", axis=along, block_size=BLOCK))
    del graph.initializer[:]
    graph.initializer.extend(inits)
    nodes = list(graph.node)
    del graph.node[:]
    graph.node.extend(made + nodes)


def _f16(graph) -> None:
    """Float32 initializers of MIN_ELEMENTS or more as float16, each read through a Cast back to float32."""
    from onnx import TensorProto, helper, numpy_helper

    casts, inits = [], []
    inputs = {i.name for i in graph.input}
    for init in graph.initializer:
        if init.data_type != TensorProto.FLOAT or int(np.prod(init.dims)) < MIN_ELEMENTS or init.name in inputs:
            inits.append(init)
            continue
        half = numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16), f"{init.name}_f16")
        inits.append(half)
        casts.append(helper.make_node("Cast", [half.name], [init.name], to=TensorProto.FLOAT,
                                      name=f"{init.name}_cast"))
    del graph.initializer[:]
    graph.initializer.extend(inits)
    nodes = list(graph.node)
    del graph.node[:]
    graph.node.extend(casts + nodes)
