"""What webinfer knows about each op, as data: one declaration per op, read by graph and codegen alike.

The graph passes (which ops fuse into elementwise programs, which ops take an epilogue), the lowering
(what may be folded at build time, which outputs may stay unproduced), the ONNX backend (which inputs
carry shape arithmetic) and the conformance runner (which ops are random) all derive their tables from
``SCHEMAS``. This module imports nothing of webinfer, so ``graph/`` needs no ``codegen/`` import for
names. Whether an op is *supported* is a different question: it has a lowering
(``codegen.registry.LOWERINGS``); an op that is lowered but not declared here has the default traits.

onnxruntime's contrib ops (``com.microsoft``) are *expanded*: graph/contrib rewrites each into ONNX ops and
webinfer ops before the other passes, so the fusions and the LLM rewrites see them like any exporter's.

To declare a new op: add one ``OpSchema`` line to ``_DECLARED`` (or its name to ``_ELEMENTWISE`` when it is
an expression of ``codegen/kernels/elementwise.OPS``) only if some trait differs from the default.
"""

from __future__ import annotations

from dataclasses import dataclass

ONNX_DOMAIN = ""
WEBINFER_DOMAIN = "webinfer"  # ops written by webinfer's own passes (fusions, KV cache, quantization)
MICROSOFT_DOMAIN = "com.microsoft"  # onnxruntime's contrib operators

# Quantized weight layouts (graph/quantize.py writes them, codegen/kernels/quant_matmul.py reads them):
# blocks of QUANT_BLOCK values along K, PER_WORD values per u32 word.
QUANT_BLOCK = 32
PER_WORD = {"int8": 4, "int4": 8, "f32": 1, "f16": 2, "nbits4": 8, "nbits8": 4}  # nbits*: MatMulNBits bytes

# Shape arithmetic on small static integer tensors runs on the host (shape inference, the passes, the lowering's
# folding, the ONNX backend's host inputs): at most this many elements. Anything bigger, or with a symbolic dim,
# is data and runs as a GPU kernel.
HOST_MAX_ELEMENTS = 64


def op_key(domain: str, op_type: str) -> str:
    """``Op`` for ONNX's default domain, ``domain:Op`` otherwise (the key of SCHEMAS and LOWERINGS)."""
    return op_type if domain in ("", "ai.onnx") else f"{domain}:{op_type}"


def op_label(domain: str, op_type: str) -> str:
    """How messages name an op: ``Op`` or ``domain.Op``."""
    return op_type if domain in ("", "ai.onnx") else f"{domain}.{op_type}"


@dataclass(frozen=True)
class OpSchema:
    op: str
    domain: str = ONNX_DOMAIN
    host_inputs: tuple[int, ...] = ()  # input positions that carry shape arithmetic (Reshape's shape), not data
    host_integers_only: bool = False  # ...only when they are integers (Range: float bounds are data)
    optional_outputs: bool = False  # outputs after the first may be left unproduced (training-only stats)
    foldable: bool | None = None  # all-constant inputs -> evaluated at build time (None: ONNX ops only)
    random: bool = False  # results differ per run: never folded, never deduplicated
    elementwise: bool = False  # an expression of the elementwise table: fuses into programs and epilogues
    epilogue: str | None = None  # the webinfer op this op becomes when it absorbs an elementwise epilogue
    base_inputs: int = 0  # with ``epilogue``: how many inputs the fused op keeps before the program's
    expanded: bool = False  # rewritten into other ops by graph/contrib before lowering (no kernel of its own)
    reduce: bool = False  # a reduction over axes (the axes input at 1 from opset 18): codegen/kernels/reduce.py

    @property
    def key(self) -> str:
        return op_key(self.domain, self.op)

    @property
    def may_fold(self) -> bool:
        if self.random:
            return False
        return self.domain in ("", "ai.onnx") if self.foldable is None else self.foldable


_REDUCE = ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
           "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
# ONNX ops written as one WGSL expression per element (codegen/kernels/elementwise.OPS has their builders).
_ELEMENTWISE = (
    "Add", "Sub", "Mul", "Div", "Pow", "Neg", "Abs", "Sqrt", "Reciprocal", "Exp", "Log", "Erf", "Tanh",
    "Sigmoid", "Relu", "LeakyRelu", "HardSigmoid", "HardSwish", "Gelu", "Where", "Equal", "Less",
    "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Xor", "Cast", "Max", "Min", "Sum", "Mean",
    "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Floor", "Ceil",
    "Round", "Sign", "Softplus", "Softsign", "Mish", "Elu", "Celu", "Selu", "ThresholdedRelu", "Swish",
    "Shrink", "PRelu", "IsNaN", "IsInf", "Mod", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
    "BitwiseNot",
)
_CONTRIB = ("MatMulNBits", "GatherBlockQuantized", "GroupQueryAttention", "MultiHeadAttention", "Attention",
            "RotaryEmbedding", "SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization",
            "SkipLayerNormalization", "EmbedLayerNormalization", "FastGelu", "BiasGelu", "QuickGelu",
            "DynamicQuantizeLSTM", "FusedMatMul", "FusedConv", "QLinearAdd", "QLinearMul", "QLinearSigmoid",
            "QLinearLeakyRelu", "QLinearGlobalAveragePool", "QLinearAveragePool", "QLinearSoftmax", "QLinearConcat",
            "QGemm", "MatMulIntegerToFloat", "DynamicQuantizeMatMul", "QuantizeLinear", "DequantizeLinear")
_RANDOM = ("RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli")

_DECLARED: list[OpSchema] = [
    # -- shape arithmetic in some inputs ----------------------------------------------------------
    *(OpSchema(op, host_inputs=(1,)) for op in ("Reshape", "Expand", "Tile", "Squeeze", "Unsqueeze",
                                                 "Upsample", "OneHot", "CumSum", "CumProd", "Trilu", "CenterCropPad",
                                                 "Compress", "Split", "SplitToSequence")),
    *(OpSchema(op, host_inputs=(1,), reduce=True) for op in _REDUCE),
    OpSchema("ConstantOfShape", host_inputs=(0,)),
    *(OpSchema(op, host_inputs=(i,)) for op, i in (("SequenceAt", 1), ("SequenceInsert", 2), ("SequenceErase", 1))),
    OpSchema("Range", host_inputs=(0, 1, 2), host_integers_only=True),
    OpSchema("Slice", host_inputs=(1, 2, 3, 4)),
    OpSchema("Pad", host_inputs=(1, 2, 3)),
    OpSchema("Col2Im", host_inputs=(1, 2)),
    OpSchema("MaxUnpool", host_inputs=(2,)),
    OpSchema("AffineGrid", host_inputs=(1,)),
    OpSchema("DFT", host_inputs=(1, 2)),
    OpSchema("STFT", host_inputs=(1, 3)),
    OpSchema("MelWeightMatrix", host_inputs=(0, 1, 2)),
    *(OpSchema(op, host_inputs=(0,)) for op in ("HannWindow", "HammingWindow", "BlackmanWindow")),
    OpSchema("NonMaxSuppression", host_inputs=(2,)),
    OpSchema("Clip", host_inputs=(1, 2), elementwise=True),
    OpSchema("TopK", host_inputs=(1,), optional_outputs=True),
    # -- training-time outputs nobody reads at inference --------------------------------------------
    *(OpSchema(op, optional_outputs=True) for op in ("BatchNormalization", "Dropout", "MaxPool", "Unique",
                                                      "DynamicQuantizeLinear")),
    *(OpSchema(op, random=True) for op in _RANDOM),
    *(OpSchema(op, elementwise=True) for op in _ELEMENTWISE),
    # -- matmul-like ops that run an elementwise program in their store (graph/passes/fuse_epilogue.py)
    OpSchema("MatMul", epilogue="FusedMatMul", base_inputs=2),
    OpSchema("Gemm", epilogue="FusedGemm", base_inputs=3),
    OpSchema("Conv", epilogue="FusedConv", base_inputs=3),
    OpSchema("Resize", host_inputs=(1, 2, 3), epilogue="FusedResize", base_inputs=4),
    # norms run the program per element of their row kernel (a post-norm's residual Add); fuse_norms writes
    # them in webinfer's domain, which takes the same epilogues
    OpSchema("LayerNormalization", optional_outputs=True, epilogue="FusedLayerNormalization", base_inputs=3),
    OpSchema("RMSNormalization", epilogue="FusedRMSNormalization", base_inputs=2),
    OpSchema("LayerNormalization", WEBINFER_DOMAIN, epilogue="FusedLayerNormalization", base_inputs=3),
    OpSchema("RMSNormalization", WEBINFER_DOMAIN, epilogue="FusedRMSNormalization", base_inputs=2),
    # -- webinfer's own ops: never folded (no reference implementation) ----------------------------
    # x, words, block params, bias (graph/quantize.py), an absorbed RMSNorm's scale (graph/passes/absorb_norms.py)
    OpSchema("MatMulQ", WEBINFER_DOMAIN, epilogue="FusedMatMulQ", base_inputs=5),
    # the image prologue's resize (graph/prepost.py): its normalisation runs in the resize kernel's store
    OpSchema("ImageResize", WEBINFER_DOMAIN, epilogue="FusedImageResize", base_inputs=1),
    *(OpSchema(op, WEBINFER_DOMAIN, elementwise=True) for op in ("Gelu", "Swish")),
    OpSchema("SampleToken", WEBINFER_DOMAIN, random=True),
    # speculative decoding's verification head (graph/llm/verify.py)
    OpSchema("LastRows", WEBINFER_DOMAIN),
    OpSchema("VerifyDraft", WEBINFER_DOMAIN, random=True),
    OpSchema("TokenLogprobs", WEBINFER_DOMAIN),  # (logits, token, k): graph/llm/logit_extras.py
    OpSchema("SoftmaxTopK", WEBINFER_DOMAIN, host_inputs=(1,)),  # (x, k): graph/passes/fuse_softmax_topk.py
    # -- control flow: subgraphs that read outer values cannot be evaluated alone (codegen: control_flow)
    *(OpSchema(op, foldable=False) for op in ("If", "Loop", "Scan")),
    # -- onnxruntime's contrib ops: graph/contrib rewrites them into ONNX and webinfer ops -----------
    *(OpSchema(op, MICROSOFT_DOMAIN, expanded=True) for op in _CONTRIB),
    # onnxruntime registers this one in ONNX's own domain; ONNX has no such op, so no reference to fold with
    OpSchema("SimplifiedLayerNormalization", foldable=False, expanded=True),
]


def _index(schemas: list[OpSchema]) -> dict[str, OpSchema]:
    table: dict[str, OpSchema] = {}
    for s in schemas:
        if s.key in table:
            raise RuntimeError(f"op {s.key} declared twice in opschema")
        table[s.key] = s
    return table


SCHEMAS: dict[str, OpSchema] = _index(_DECLARED)


def schema(op_type: str, domain: str = ONNX_DOMAIN) -> OpSchema:
    """The declaration of an op, or the defaults for one that declares nothing special."""
    key = op_key(domain, op_type)
    found = SCHEMAS.get(key)
    if found is not None:
        return found
    return OpSchema(op_type, "" if domain == "ai.onnx" else domain)


def elementwise_ops(domain: str = ONNX_DOMAIN) -> frozenset[str]:
    """Op names of ``domain`` that are expressions of the elementwise table."""
    return frozenset(s.op for s in SCHEMAS.values() if s.elementwise and s.domain == domain)


def epilogue_bases(domain: str = ONNX_DOMAIN) -> dict[str, tuple[str, int]]:
    """Base op -> (fused op, inputs it keeps) for the ops of ``domain`` that take an epilogue."""
    return {s.op: (s.epilogue, s.base_inputs) for s in SCHEMAS.values() if s.epilogue and s.domain == domain}


def fused_base_inputs() -> dict[str, int]:
    """Fused op (``FusedMatMul``, ...) -> how many of its inputs are its base op's."""
    return {s.epilogue: s.base_inputs for s in SCHEMAS.values() if s.epilogue}


def host_inputs() -> dict[str, tuple[int, ...]]:
    """ONNX op -> input positions that carry shape arithmetic."""
    return {s.op: s.host_inputs for s in SCHEMAS.values() if s.host_inputs and s.domain == ONNX_DOMAIN}


def integer_host_ops() -> frozenset[str]:
    """ONNX ops whose host inputs carry shape arithmetic only when they are integers."""
    return frozenset(s.op for s in SCHEMAS.values() if s.host_integers_only and s.domain == ONNX_DOMAIN)


def reduce_ops() -> tuple[str, ...]:
    """The ONNX reductions over axes (ReduceSum, ReduceMean, ...), in declaration order."""
    return tuple(s.op for s in SCHEMAS.values() if s.reduce and s.domain == ONNX_DOMAIN)


def random_ops() -> frozenset[str]:
    return frozenset(s.op for s in SCHEMAS.values() if s.random and s.domain == ONNX_DOMAIN)
