"""MatMul / Gemm / Conv / Resize / Layer- and RMSNormalization followed by elementwise work -> one kernel that
applies it before storing.

The base op's output must have a single consumer: an elementwise node of our table (bias Add, Relu,
HardSwish, Clip, ...) or a ``FusedElementwise`` (fuse_elementwise runs first, so a bias + GELU or a bias
+ residual Add arrive as one program). The result is ``webinfer.FusedMatMul`` / ``FusedGemm`` /
``FusedConv`` / ``FusedRMSNormalization`` ...: the base op's inputs and attributes, then the program's other
inputs, and the program with input 0 standing for the base op's result (a base whose other outputs are read,
a LayerNormalization's statistics, stays as it is). The consumer's output must keep the base op's shape (a
per-channel gate multiplying a bigger tensor is not an epilogue). The lowering (codegen/kernels/fused.py)
runs the program inside the matmul/conv kernel when each extra input is a scalar, a per-channel or
per-column vector or an output-shaped tensor, and as a second kernel otherwise. Two rules: the ONNX bases
and webinfer's own.
"""

from __future__ import annotations

import onnx_ir as ir

from ...opschema import WEBINFER_DOMAIN, epilogue_bases
from ._program import FLOAT_TYPES, Program, bound_count, fusable, use_webinfer_domain
from ._util import install
from .rules import Match, Rule, pass_of

BASES = epilogue_bases()  # MatMul -> (FusedMatMul, 2 inputs), Gemm, Conv, Resize, the norms
# webinfer's quantized matmul (graph/quantize.py: x, words, block params, bias) and the image prologue's
# ImageResize (graph/prepost.py) take epilogues too
WEBINFER_BASES = epilogue_bases(WEBINFER_DOMAIN)
MAX_EXTRA_BOUND = 3  # a, b, bias + 3 extras + out stays within WebGPU's 8 storage buffers


def _consumer(value: ir.Value) -> ir.Node | None:
    nodes = {id(u.node): u.node for u in value.uses()}
    if len(nodes) != 1 or value.is_graph_output():
        return None
    return next(iter(nodes.values()))


def _same_shape(a: ir.Value, b: ir.Value) -> bool:
    """False when the shapes are known to differ (unknown dims are checked again by the lowering)."""
    if a.shape is None or b.shape is None:
        return a.shape is b.shape
    if len(a.shape) != len(b.shape):
        return False
    return all(x == y for x, y in zip(a.shape.dims, b.shape.dims) if isinstance(x, int) and isinstance(y, int))


def _program_of(node: ir.Node) -> tuple[Program, list[ir.Value]] | None:
    if node.domain == WEBINFER_DOMAIN and node.op_type == "FusedElementwise":
        return Program.from_node(node, len(node.inputs)), list(node.inputs)
    if not fusable(node):
        return None
    inputs = []
    for v in node.inputs:
        if v is not None and all(v is not w for w in inputs):
            inputs.append(v)
    return Program.from_nodes([node], inputs), inputs


def _pattern(base: ir.Node) -> Match | None:
    """The base op -> its one consumer, an elementwise node of our table or a FusedElementwise program."""
    consumer = _consumer(base.outputs[0])
    found = _program_of(consumer) if consumer is not None and consumer.graph is base.graph else None
    if found is None:
        return None
    program, inputs = found
    return Match([base, consumer], {"base": base, "consumer": consumer, "program": program, "inputs": inputs})


def _condition(m: Match) -> bool:
    """A float result of the base op read by the program alone (no other output read, a LayerNormalization's
    statistics), the program's result of the same shape and dtype, its extra inputs within the bindings."""
    base, consumer = m["base"], m["consumer"]
    out = base.outputs[0]
    if any(o.uses() or o.is_graph_output() for o in base.outputs[1:]) or out.dtype not in FLOAT_TYPES:
        return False
    if not _same_shape(out, consumer.outputs[0]):
        return False
    extras = [v for v in m["inputs"] if v is not out]
    return bound_count(extras) <= MAX_EXTRA_BOUND and consumer.outputs[0].dtype == out.dtype


def _replacement(model: ir.Model, m: Match) -> None:
    base, consumer, inputs = m["base"], m["consumer"], m["inputs"]
    name, n_base = (WEBINFER_BASES if base.domain == WEBINFER_DOMAIN else BASES)[base.op_type]
    out = base.outputs[0]
    extras = [v for v in inputs if v is not out]
    mapping = [0 if v is out else 1 + extras.index(v) for v in inputs]
    program = m["program"].remap(mapping, 1 + len(extras))
    base_inputs = list(base.inputs) + [None] * (n_base - len(base.inputs))
    attrs = [ir.Attr(k, a.type, a.value) for k, a in base.attributes.items()] + program.to_attributes()
    fused = ir.Node(WEBINFER_DOMAIN, name, base_inputs + extras, attributes=attrs,
                    name=base.name or consumer.name, num_outputs=1)
    install(model.graph, fused, consumer, consumer.outputs, [consumer, base])  # (extras may come after the base)
    use_webinfer_domain(model)


EPILOGUE = Rule("epilogue", tuple(BASES), _pattern, _condition, _replacement)
OWN_EPILOGUE = Rule("own_epilogue", tuple(WEBINFER_BASES), _pattern, _condition, _replacement,
                    domains=(WEBINFER_DOMAIN,))
RULES = (EPILOGUE, OWN_EPILOGUE)
run = pass_of(*RULES)
