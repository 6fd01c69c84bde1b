"""onnxruntime's contrib operators (``com.microsoft``), rewritten into ONNX ops and webinfer's own ops.

Quantized LLMs from onnxruntime-genai's model builder and encoders from onnxruntime's transformer optimizer
carry fused operators that ONNX does not define. Each has an *expansion* here: a function that writes the
same computation with ops webinfer already lowers (``RMSNormalization``, ``Gelu``, ``Attention``,
``RotaryEmbedding`` (ONNX opset 23's semantics, written in webinfer's domain so that any model opset can
hold them), the quantized ``MatMulQ``/``GatherQ`` over the model's own packed weights, ...). The
build runs the expansions first, so the fusion passes and the LLM rewrites see an exporter's usual ops and
fuse them the usual way (a residual Add into the matmul before it, SiLU * up into the gate matmul).

An expansion that cannot express a node (an attribute or input form it does not handle) raises
UnsupportedOpError naming the node and the reason. Each expansion is tested against onnxruntime.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx_ir as ir

from ...errors import UnsupportedOpError
from ...opschema import MICROSOFT_DOMAIN, WEBINFER_DOMAIN, op_key, op_label
from ..passes._util import replace_value

EXPANSIONS: dict[str, Callable] = {}


def expansion(*ops: str, domain: str = MICROSOFT_DOMAIN):
    """Register ``fn(node, b: Builder) -> list of output values`` (None where an output is not produced)."""

    def register(fn):
        for op in ops:
            EXPANSIONS[op_key(domain, op)] = fn
        return fn

    return register


class Builder:
    """Writes the replacement nodes of one expanded node, inserted where that node was."""

    def __init__(self, graph: ir.Graph, node: ir.Node, cache: dict | None = None):
        self.graph, self.node = graph, node
        self.nodes: list[ir.Node] = []
        self.cache = {} if cache is None else cache  # shared by one expand() run (packed weights)

    def op(self, op_type: str, inputs: list, attrs: dict | None = None, *, domain: str = "", outputs: int = 1,
           dtype: ir.DataType | None = None, shape=None) -> ir.Value | list[ir.Value]:
        """Append a node; ``dtype``/``shape`` annotate its first output (default: its first input's)."""
        attributes = [a if isinstance(a, ir.Attr) else ir.convenience.convert_attribute(k, a)
                      for k, a in (attrs or {}).items() if a is not None]
        name = f"{self.node.name or self.node.op_type}/{op_type}_{len(self.nodes)}"
        node = ir.Node(domain, op_type, inputs, attributes=attributes, num_outputs=outputs, name=name)
        self.nodes.append(node)
        first = next((v for v in inputs if v is not None), None)
        out = node.outputs[0]
        out.dtype = dtype or next((v.dtype for v in inputs if v is not None and v.dtype is not None), None) \
            or self.float_dtype
        if shape is not None:
            out.shape = _copy_shape(shape)
        elif first is not None and op_type in _SAME_SHAPE:
            out.shape = _copy_shape(first.shape)
        return list(node.outputs) if outputs > 1 else out

    def const(self, array, hint: str) -> ir.Value:
        import numpy as np

        from ..passes._util import new_initializer

        return new_initializer(self.graph, np.asarray(array), f"{self.node.name or self.node.op_type}/{hint}")

    def unsupported(self, why: str) -> UnsupportedOpError:
        n = self.node
        return UnsupportedOpError(f"{op_label(n.domain, n.op_type)} (node {n.name!r}): {why}")

    @property
    def float_dtype(self) -> ir.DataType | None:
        """The node's float type when its values carry none yet (shape inference runs after the expansion):
        its first output's declared type, else its first float input's (scales, gamma: constants)."""
        for v in list(self.node.outputs[:1]) + list(self.node.inputs):
            if v is not None and v.dtype in (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.DOUBLE,
                                             ir.DataType.BFLOAT16):
                return v.dtype
        return None

    # -- reading the node ------------------------------------------------------------------------
    def input(self, i: int) -> ir.Value | None:
        return self.node.inputs[i] if i < len(self.node.inputs) else None

    def attr(self, name: str, default=None):
        a = self.node.attributes.get(name)
        return default if a is None else a.value

    def wanted(self, i: int) -> bool:
        """Whether output ``i`` exists and is read by anything."""
        outs = self.node.outputs
        return i < len(outs) and (bool(outs[i].uses()) or outs[i].is_graph_output())


def _copy_shape(shape) -> ir.Shape | None:
    if shape is None:
        return None
    return ir.Shape(list(shape.dims) if isinstance(shape, ir.Shape) else list(shape))


_SAME_SHAPE = {"Add", "Sub", "Mul", "Div", "Sigmoid", "Cast", "Where", "Neg", "RotaryEmbedding"}


def _replace(graph: ir.Graph, node: ir.Node, outs: list) -> None:
    b_nodes = outs
    for i, old in enumerate(node.outputs):
        new = b_nodes[i] if i < len(b_nodes) else None
        if new is None:
            if old.uses() or old.is_graph_output():
                label = op_label(node.domain, node.op_type)
                raise UnsupportedOpError(f"{label} (node {node.name!r}): output {i} ({old.name}) is not supported")
            continue
        new.dtype = new.dtype or old.dtype
        if old.shape is not None:
            new.shape = old.shape
        if not replace_value(graph, old, new):  # new is a graph input/initializer: keep an Identity
            ident = ir.Node("", "Identity", [new], num_outputs=1)
            graph.insert_before(node, ident)
            ident.outputs[0].dtype, ident.outputs[0].shape = old.dtype, old.shape
            replace_value(graph, old, ident.outputs[0])
    graph.remove(node, safe=True)


def expand(model: ir.Model, keep: frozenset[str] = frozenset()) -> int:
    """Expand every contrib op of the main graph except the op keys in ``keep``; returns how many."""
    graph = model.graph
    count, cache = 0, {}
    for node in list(graph):
        key = op_key(node.domain, node.op_type)
        fn = EXPANSIONS.get(key)
        if fn is None or key in keep:
            continue
        b = Builder(graph, node, cache)
        outs = fn(node, b)
        if b.nodes:
            graph.insert_before(node, b.nodes)
        _replace(graph, node, outs)
        count += 1
    if count:
        model.opset_imports.setdefault(WEBINFER_DOMAIN, 1)
    return count


from . import activations, attention, linear, norms, qlinear, quant  # noqa: E402, F401  (register their expansions)
