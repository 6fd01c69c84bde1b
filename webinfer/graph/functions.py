"""ONNX ops that webinfer has no kernel for but that ONNX defines as a function of other ops are inlined.

ONNX gives many ops a function body (plain, or built per node from its attributes and input types, like
``ai.onnx.preview.FlexAttention``, whose ``score_mod``/``prob_mod`` subgraphs become part of the body).
``onnx.inliner`` writes the body in place of each such node, so the build lowers the ops it is made of.
Ops with a kernel of their own keep it (``lowered``), random ops are left alone (their bodies are random too).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import onnx
import onnx.inliner
import onnx_ir as ir

from ..opschema import op_key, schema


def all_graphs(graph: ir.Graph) -> Iterable[ir.Graph]:
    """``graph`` and every subgraph in it (If branches, loop bodies), depth first."""
    yield graph
    for node in graph:
        for attr in node.attributes.values():
            if attr.type == ir.AttributeType.GRAPH:
                yield from all_graphs(attr.value)
            elif attr.type == ir.AttributeType.GRAPHS:
                for g in attr.value:
                    yield from all_graphs(g)


def inlinable(domain: str, op_type: str, version: int) -> bool:
    """Whether ONNX defines ``op_type`` (at opset ``version`` of its domain) as a function of other ops, and it
    is not a random op."""
    if schema(op_type, domain).random:
        return False
    try:
        s = onnx.defs.get_schema(op_type, version, domain)
    except onnx.defs.SchemaError:
        return False
    return bool(s.has_function or s.has_context_dependent_function)


def function_ops(model: ir.Model, lowered: Callable[[str], bool]) -> list[tuple[str, str]]:
    """(domain, op) of the model's nodes that have no kernel (``lowered(key)`` is False) but a function body."""
    found: set[tuple[str, str]] = set()
    for graph in all_graphs(model.graph):
        for node in graph:
            key = op_key(node.domain, node.op_type)
            if (node.domain, node.op_type) in found or lowered(key):
                continue
            if inlinable(node.domain, node.op_type, model.opset_imports.get(node.domain, 1)):
                found.add((node.domain, node.op_type))
    return sorted(found)


def inline_functions(model: ir.Model, lowered: Callable[[str], bool]) -> ir.Model:
    """``model`` with every op of ``function_ops`` replaced by its ONNX function body (the same model object
    when there is none; a model the inliner cannot handle is returned unchanged: the support check names it)."""
    ids = function_ops(model, lowered)
    if not ids:
        return model
    try:
        proto = onnx.inliner.inline_selected_functions(ir.serde.serialize_model(model), ids,
                                                       inline_schema_functions=True)
    except Exception:  # noqa: BLE001 - the op then stays and is reported as unsupported
        return model
    return ir.serde.deserialize_model(proto)
