"""Weight-only quantization: MatMul/Gemm weights and large embedding tables -> packed u32 words.

Every quantized (or re-laid) weight is stored N-major: row ``n`` holds the K reduction values of one
output column, in blocks of 32 along K (K padded with zeros to a multiple of 32). N-major is the layout
of an embedding table ([vocab, hidden]) too, so a table that a Gather reads and a MatMul uses transposed
(tied LM head) is stored once and read by both kernels.

Formats (``words`` is uint32 [N, Kp / per_word], ``params`` float32):
- ``int8``: symmetric; 4 values per word, byte j = k + j (two's complement); params [N, Kp/32] hold the
  block's max |w| (the kernel's ``unpack4x8snorm`` yields q / 127, so w = q/127 * amax).
- ``int4``: asymmetric (like GGUF Q4_1); 8 values per word, byte j holds k + j in its low nibble and
  k + 4 + j in its high nibble; params [N, Kp/32, 2] hold (255 * scale, min) (``unpack4x8unorm`` of the
  masked nibbles yields q / 255, so w = q/255 * (255 * scale) + min).
- ``f32``: no packing (words are float32 [N, K]); used to share a tied table without quantizing.
- ``f16``: 2 float16 values per word, value k in the low half of word k / 2 (``unpack2x16float``, core
  WGSL: no ``shader-f16`` needed, so one artifact runs on every adapter; products accumulate in f32), rows
  of K padded to a multiple of 4. ``--quantize f16`` rounds f32 weights and tables to it (half the bytes,
  nearest-even, overflow to inf like numpy); a float16 weight the model stores so (``Cast(float16
  constant)``) is kept as it is.

Embedding tables (and a LM head tied to one) are stored int8 also under ``int4``: they decide the top-1
token, and GGUF "Q4_1" files keep them at Q8_0 (symmetric int8 blocks of 32: our int8 recovers them to
3e-8). SmolLM2-135M on a 612-token held text: with the table int4 too, top-1 agreement with fp32 was
80.4 % and perplexity +9.9 %; with it int8, 100 % and +0.00 % (tests/llm/test_quant_accuracy.py).

The graph rewrite writes ``webinfer.MatMulQ(x, words, params?, bias?)`` and ``webinfer.GatherQ(words,
params?, indices)``; codegen/kernels/quant_matmul.py lowers them. A weight the model already stores
quantized (``DequantizeLinear`` of an int4/int8 constant, opset 21's blocked form) is taken as it is, with or
without ``--quantize`` (graph/qdq_weights.py).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ..opschema import QUANT_BLOCK, WEBINFER_DOMAIN
from .passes._util import const, new_initializer, replace_value
from .qdq_weights import PackedWeight, dequantized_weight

BLOCK = QUANT_BLOCK
FORMATS = ("int8", "int4", "f16")
GATHER_MIN_ELEMENTS = 1 << 16  # smaller tables are not worth a special kernel
TABLE_FORMAT = {"int8": "int8", "int4": "int8", "f16": "f16"}  # embedding tables, and LM heads tied to them


ROWS_PER_PASS = 4096  # rows packed at a time: the temporaries stay small beside a 151,936-row table


def quantize_nk(w: np.ndarray, fmt: str) -> tuple[np.ndarray, np.ndarray | None]:
    """Pack an N-major float matrix [N, K] into (words, params) of ``fmt``, a band of rows at a time into
    preallocated outputs (a build's peak memory is the model plus its packed form, not their temporaries)."""
    w = np.asarray(w, dtype=np.float32)
    if fmt == "f32":
        return np.ascontiguousarray(w), None
    n = w.shape[0]
    if n <= ROWS_PER_PASS:
        return _quantize_rows(w, fmt)
    words, params = _quantize_rows(w[:ROWS_PER_PASS], fmt)
    all_words = np.empty((n, *words.shape[1:]), words.dtype)
    all_params = None if params is None else np.empty((n, *params.shape[1:]), params.dtype)
    for lo in range(0, n, ROWS_PER_PASS):
        if lo:
            words, params = _quantize_rows(w[lo:lo + ROWS_PER_PASS], fmt)
        all_words[lo:lo + len(words)] = words
        if all_params is not None:
            all_params[lo:lo + len(params)] = params
    return all_words, all_params


def _quantize_rows(w: np.ndarray, fmt: str) -> tuple[np.ndarray, np.ndarray | None]:
    n, k = w.shape
    if fmt == "f16":
        return half_words(w), None
    kp = -(-k // BLOCK) * BLOCK
    blocks = np.zeros((n, kp), np.float32)
    blocks[:, :k] = w
    blocks = blocks.reshape(n, kp // BLOCK, BLOCK)
    if fmt == "int8":
        amax = np.abs(blocks).max(axis=2)
        scale = np.where(amax > 0, amax / 127.0, 1.0)
        q = np.clip(np.rint(blocks / scale[..., None]), -127, 127).astype(np.int8)
        words = q.reshape(n, kp).view(np.uint8).reshape(n, kp // 4, 4).copy().view("<u4").reshape(n, kp // 4)
        return words.astype(np.uint32), amax.astype(np.float32)
    if fmt == "int4":
        lo, hi = blocks.min(axis=2), blocks.max(axis=2)
        scale = (hi - lo) / 15.0
        safe = np.where(scale > 0, scale, 1.0)
        q = np.clip(np.rint((blocks - lo[..., None]) / safe[..., None]), 0, 15).astype(np.uint8)
        q = q.reshape(n, kp // 8, 2, 4)
        packed = (q[:, :, 0, :] | (q[:, :, 1, :] << 4)).astype(np.uint8)
        words = np.ascontiguousarray(packed).view("<u4").reshape(n, kp // 8)
        params = np.stack([scale * 255.0, lo], axis=-1).astype(np.float32)
        return words.astype(np.uint32), params
    raise ValueError(f"unknown weight format {fmt!r}")


def half_words(w: np.ndarray) -> np.ndarray:
    """A float [N, K] matrix rounded to float16 (nearest even; past 65504: inf, as numpy and onnxruntime's
    Cast round) as u32 words [N, Kp / 2], K padded with zeros to a multiple of 4 (whole vec4s)."""
    n, k = w.shape
    rows = np.zeros((n, -(-k // 4) * 4), np.float16)
    with np.errstate(over="ignore"):
        rows[:, :k] = w
    return rows.view(np.uint32)


def dequantize_nk(words: np.ndarray, params: np.ndarray | None, fmt: str, k: int) -> np.ndarray:
    """The float32 [N, K] matrix the kernels compute with (the reference for tests and error checks)."""
    if fmt == "f32":
        return np.asarray(words, np.float32)
    if fmt == "f16":
        return np.ascontiguousarray(words, "<u4").view(np.float16)[:, :k].astype(np.float32)
    n = words.shape[0]
    b = np.ascontiguousarray(words).view(np.uint8).reshape(n, -1)
    if fmt == "int8":
        q = b.view(np.int8).astype(np.float32) / np.float32(127.0)
        w = q.reshape(n, -1, BLOCK) * params[..., None]
    else:
        b = b.reshape(n, -1, 4)
        q = np.concatenate([b & 15, b >> 4], axis=2).astype(np.float32) / np.float32(255.0)
        q = q.reshape(n, -1, BLOCK)
        w = q * params[..., 0][..., None] + params[..., 1][..., None]
    return w.reshape(n, -1)[:, :k].astype(np.float32)


# With n_major_f32 (generation builds), f32 weights (but the tiniest) are stored N-major: a decode step's
# matrix-vector product then streams each column's contiguous row. SmolLM2-135M fp32 on lavapipe: K-major
# layers streamed 1.7 GB/s, each SIMD group striding a page per weight row; decode 3.7 -> 9.4 tok/s.
N_MAJOR_MIN_ELEMENTS = 256


class _Rewriter:
    def __init__(self, model: ir.Model, fmt: str | None, n_major_f32: bool = False, binding_bytes: int | None = None):
        self.graph = model.graph
        self.fmt = fmt
        self.n_major_f32 = n_major_f32
        self.binding_bytes = binding_bytes
        self.packed: dict[tuple, tuple] = {}  # (source value id, transposed, scale) -> (words, params)
        self.dropped: list[ir.Value] = []  # sources freed (kept as objects: their ids key ``packed``)
        self.count = 0
        self.tables = {id(n.inputs[0]) for n in model.graph if self.is_table_gather(n)}

    @staticmethod
    def is_table_gather(node: ir.Node) -> bool:
        """A Gather of rows of a large constant 2-D float table (an embedding lookup)."""
        if node.op_type != "Gather" or node.domain != "":
            return False
        table = const(node.inputs[0])
        axis = node.attributes["axis"].as_int() if "axis" in node.attributes else 0
        return (table is not None and table.ndim == 2 and table.dtype == np.float32 and axis == 0
                and table.size >= GATHER_MIN_ELEMENTS)

    def pack(self, src: ir.Value, array_nk: np.ndarray, transposed: bool, fmt: str, alpha: float = 1.0):
        """Initializers for ``array_nk`` in ``fmt``, shared by every use of the same source weight."""
        key = (id(src), transposed, fmt, alpha)
        if key not in self.packed:
            if fmt == "f32" and not transposed and alpha == 1.0 and src.is_initializer():
                self.packed[key] = (src, None)
            else:
                words, params = quantize_nk(array_nk if alpha == 1.0 else array_nk * np.float32(alpha), fmt)
                hint = f"{src.name or 'w'}.{fmt}"
                wv = new_initializer(self.graph, words, hint)
                pv = new_initializer(self.graph, params, hint + ".params") if params is not None else None
                self.packed[key] = (wv, pv)
        return self.packed[key]

    def weight_nk(self, b: ir.Value) -> tuple[ir.Value, np.ndarray, bool] | None:
        """(source, N-major array, whether it came through a Transpose) for a MatMul's constant B."""
        value = const(b)
        if value is not None and value.ndim == 2 and value.dtype == np.float32:
            return b, value.T, True
        node = b.producer()
        if node is not None and node.op_type == "Transpose" and node.domain == "":
            perm = node.attributes.get("perm")
            src = const(node.inputs[0])
            if src is not None and src.ndim == 2 and src.dtype == np.float32 and (perm is None or
                                                                                  list(perm.as_ints()) == [1, 0]):
                return node.inputs[0], src, False
        return None

    def dequantized(self, b: ir.Value, n_major: bool) -> PackedWeight | None:
        """A weight the model already stores quantized (DequantizeLinear of constants), packed as it is."""
        found = dequantized_weight(b, n_major)
        node = b.producer() if found is None and b is not None else None
        if node is not None and node.op_type == "Transpose" and node.domain == "":
            perm = node.attributes.get("perm")
            if perm is None or list(perm.as_ints()) == [1, 0]:
                found = dequantized_weight(node.inputs[0], not n_major)
        return found

    def emit_dequantized(self, node: ir.Node, w: PackedWeight, bias: np.ndarray | None, alpha: float) -> None:
        key = ("dq", id(w.source), w.fmt, w.block, alpha)
        if key not in self.packed:
            hint = f"{w.source.name or 'w'}.{w.fmt}"
            self.packed[key] = (new_initializer(self.graph, w.words, hint),
                                new_initializer(self.graph, w.params * np.float32(alpha), hint + ".params"))
        inputs = list(self.packed[key])
        if bias is not None:
            inputs.append(new_initializer(self.graph, bias, f"{w.source.name or 'w'}.bias"))
        self.replace(node, "MatMulQ", [node.inputs[0], *inputs],
                     {"format": w.fmt, "k": w.k, "n": w.n, "block": w.block})

    def half(self, b: ir.Value, n_major: bool) -> tuple[ir.Value, np.ndarray] | None:
        """(source, N-major float16 [N, K]) for a weight read as ``Cast(float16 constant)`` (also transposed)."""
        node = b.producer() if b is not None else None
        if node is not None and node.op_type == "Transpose" and node.domain == "":
            perm = node.attributes.get("perm")
            if perm is not None and list(perm.as_ints()) != [1, 0]:
                return None
            node, n_major = node.inputs[0].producer(), not n_major
        if node is None or node.op_type != "Cast" or node.domain != "" \
                or node.attributes["to"].as_int() != ir.DataType.FLOAT.value:
            return None
        src = node.inputs[0]
        inner = src.producer()
        if const(src) is None and inner is not None and inner.op_type == "Transpose" and inner.domain == "":
            perm = inner.attributes.get("perm")  # Cast(Transpose(w)), as sink_transposes leaves it
            if perm is not None and list(perm.as_ints()) != [1, 0]:
                return None
            src, n_major = inner.inputs[0], not n_major
        w = const(src)
        if w is None or w.dtype != np.float16 or w.ndim != 2:
            return None
        return src, (w if n_major else w.T)

    def emit_half(self, node: ir.Node, src: ir.Value, w_nk: np.ndarray, bias: np.ndarray | None) -> None:
        key = ("f16", id(src), w_nk.shape)
        if key not in self.packed:
            self.packed[key] = new_initializer(self.graph, half_words(w_nk), f"{src.name or 'w'}.f16")
        inputs = [node.inputs[0], self.packed[key]]
        if bias is not None:
            inputs += [None, new_initializer(self.graph, bias, f"{src.name or 'w'}.bias")]
        self.replace(node, "MatMulQ", inputs, {"format": "f16", "k": int(w_nk.shape[1]), "n": int(w_nk.shape[0])})

    def matmul(self, node: ir.Node) -> None:
        packed = self.dequantized(node.inputs[1], n_major=False)
        if packed is not None:
            self.emit_dequantized(node, packed, None, 1.0)
            return
        half = self.half(node.inputs[1], n_major=False)
        if half is not None:
            self.emit_half(node, *half, None)
            return
        found = self.weight_nk(node.inputs[1])
        if found is None or (self.fmt is None and found[2] and not self.f32_worth_n_major(found[1])):
            return  # without quantization only a transposed constant (a tied table) is worth rewriting
        src, w_nk, transposed = found
        self.emit_matmul(node, src, w_nk, transposed, None, 1.0)

    def gemm(self, node: ir.Node) -> None:
        attrs = {n: node.attributes[n].value for n in ("transA", "transB", "alpha", "beta") if n in node.attributes}
        if attrs.get("transA", 0):
            return
        packed = self.dequantized(node.inputs[1], n_major=bool(attrs.get("transB", 0)))
        half = None
        if packed is None and float(attrs.get("alpha", 1.0)) == 1.0:
            half = self.half(node.inputs[1], n_major=bool(attrs.get("transB", 0)))
        b = const(node.inputs[1])
        if packed is None and half is None and (b is None or b.ndim != 2 or b.dtype != np.float32
                               or (self.fmt is None and not self.f32_worth_n_major(b))):
            return
        n = packed.n if packed is not None else half[1].shape[0] if half is not None else \
            b.shape[0] if attrs.get("transB", 0) else b.shape[1]
        bias = None
        if len(node.inputs) > 2 and node.inputs[2] is not None:
            c = const(node.inputs[2])
            if c is None or c.size not in (1, n) or (c.ndim == 2 and c.shape[0] != 1):
                return
            bias = np.broadcast_to(c.reshape(-1) * np.float32(attrs.get("beta", 1.0)), (n,)).astype(np.float32)
        if packed is not None:
            self.emit_dequantized(node, packed, bias, float(attrs.get("alpha", 1.0)))
            return
        if half is not None:
            self.emit_half(node, *half, bias)
            return
        w_nk, transposed = (b, False) if attrs.get("transB", 0) else (b.T, True)
        self.emit_matmul(node, node.inputs[1], w_nk, transposed, bias, float(attrs.get("alpha", 1.0)))

    def f32_worth_n_major(self, w: np.ndarray) -> bool:
        # a weight over one binding too: N-major, its rows (output columns) split into parts (codegen/split.py)
        over = self.binding_bytes is not None and w.size * 4 > self.binding_bytes
        return over or (self.n_major_f32 and w.size >= N_MAJOR_MIN_ELEMENTS)

    def emit_matmul(self, node, src, w_nk, transposed, bias, alpha) -> None:
        fmt = "f32" if self.fmt is None else TABLE_FORMAT[self.fmt] if id(src) in self.tables else self.fmt
        words, params = self.pack(src, w_nk, transposed, fmt, alpha)
        inputs = [node.inputs[0], words, params]
        if bias is not None:
            inputs.append(new_initializer(self.graph, bias, f"{src.name or 'w'}.bias"))
        n, k = w_nk.shape
        self.replace(node, "MatMulQ", inputs, {"format": fmt, "k": int(k), "n": int(n)})

    def gather(self, node: ir.Node) -> None:
        if self.fmt is None or not self.is_table_gather(node):
            return
        table, fmt = const(node.inputs[0]), TABLE_FORMAT[self.fmt]
        words, params = self.pack(node.inputs[0], table, False, fmt)
        self.replace(node, "GatherQ", [words, params, node.inputs[1]], {"format": fmt, "k": int(table.shape[1])})

    def replace(self, node: ir.Node, op: str, inputs: list, attrs: dict) -> None:
        attributes = [ir.AttrString(a, v) if isinstance(v, str) else ir.AttrInt64(a, v) for a, v in attrs.items()]
        new = ir.Node(WEBINFER_DOMAIN, op, inputs, attributes=attributes, name=node.name or None, num_outputs=1)
        self.graph.insert_before(node, new)
        out = new.outputs[0]
        out.dtype, out.shape = node.outputs[0].dtype, node.outputs[0].shape
        if not replace_value(self.graph, node.outputs[0], out):
            self.graph.remove(new, safe=True)
            return
        old_inputs = list(node.inputs)
        self.graph.remove(node, safe=True)
        self.count += 1
        for value in old_inputs:
            self.drop_unused(value)

    def drop_unused(self, value: ir.Value | None) -> None:
        """Free a weight nothing reads any more (through the Transpose/Cast that fed it), as soon as it is
        packed: a build then holds each weight about once, not the model and its packed copy."""
        while value is not None and not value.uses() and not value.is_graph_output() and not value.is_graph_input():
            if value.is_initializer():
                self.graph.initializers.pop(value.name, None)
                value.const_value = None
                self.dropped.append(value)
                return
            node = value.producer()
            if node is None or node.domain != "" or node.op_type not in ("Transpose", "Cast") or len(node.outputs) != 1:
                return
            value = node.inputs[0]
            self.graph.remove(node, safe=True)


def quantize_weights(model: ir.Model, fmt: str | None, n_major_f32: bool = False,
                     binding_bytes: int | None = None) -> int:
    """Rewrite MatMul/Gemm constant weights and large Gather tables into ``fmt`` (``int8``/``int4``/``f16``).

    With ``fmt=None`` nothing is quantized, but a MatMul of a transposed constant (a tied LM head) still
    becomes an f32 ``MatMulQ`` over the untransposed table, so the weight is stored once; with
    ``n_major_f32`` (a build for generation, whose decode steps are matrix-vector products) every large f32
    weight does, stored N-major, as does one over ``binding_bytes`` (then split by rows when lowered). Returns
    the number of rewritten nodes.
    """
    if fmt is not None and fmt not in FORMATS:
        raise ValueError(f"unknown quantization {fmt!r}; choose from {FORMATS}")
    if WEBINFER_DOMAIN not in model.opset_imports:
        model.opset_imports[WEBINFER_DOMAIN] = 1
    rw = _Rewriter(model, fmt, n_major_f32, binding_bytes)
    for node in list(model.graph):
        if node.domain != "":
            continue
        if node.op_type == "MatMul":
            rw.matmul(node)
        elif node.op_type == "Gemm":
            rw.gemm(node)
        elif node.op_type == "Gather":
            rw.gather(node)
    return rw.count


def rewrite(fmt: str | None, n_major_f32: bool = False, binding_bytes: int | None = None):
    """The build's rewrite hook: ``{"quantize": fn(model)}`` for graph/optimize.py."""
    return {"quantize": lambda model: quantize_weights(model, fmt, n_major_f32, binding_bytes)}
