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

import onnx_ir as ir

from ...errors import UnsupportedOpError
from ...opschema import WEBINFER_DOMAIN, op_key, op_label
from ..passes._util import replace_value
from . import activations, attention, linear, norms, qlinear, quant, recurrent  # noqa: F401  (register their expansions)
from .builder import EXPANSIONS, Builder


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
