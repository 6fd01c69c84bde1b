"""Constant folding of one node whose inputs are all known at build time, with ONNX's reference evaluator."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir

from ..errors import UnsupportedOpError


def fold_node(node: ir.Node, values: list, opset: int) -> list[np.ndarray] | None:
    """Constant folding: evaluate a node whose inputs are all constants with ONNX's reference evaluator."""
    from onnx.reference import ReferenceEvaluator

    proto = ir.serde.serialize_node(node)
    names = [f"i{i}" if v is not None else "" for i, v in enumerate(values)]
    outs = [f"o{i}" for i in range(len(node.outputs))]
    del proto.input[:]
    proto.input.extend(names)
    del proto.output[:]
    proto.output.extend(outs)
    graph = onnx.helper.make_graph([proto], "fold", [], [onnx.helper.make_empty_tensor_value_info(o) for o in outs])
    feeds = {n: v for n, v in zip(names, values) if n}
    versions, results = [opset], None
    while results is None:
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", versions[0])])
        try:
            results = ReferenceEvaluator(model).run(None, feeds)
        except Exception as e:
            if len(versions) == 1 and "No implementation for operator" in str(e):
                versions += later_versions(proto, opset)
            versions.pop(0)
            if not versions:
                raise UnsupportedOpError(f"{node.op_type} (node {node.name!r}): constant folding failed: {e}") from None
    if any(r is None or isinstance(r, (list, tuple)) for r in results):
        return None  # a sequence or an optional: lowered as a build-time structure instead (codegen/nested.py)
    return [np.asarray(r) for r in results]


def later_versions(node: onnx.NodeProto, opset: int) -> list[int]:
    """The versions of ``node``'s op after the one at ``opset`` whose schema still takes the node's attributes.
    onnx.reference lacks some ops' early versions (DequantizeLinear before 19); a later version that only adds
    types or attributes means the same for this node, so folding evaluates it there."""
    if node.domain not in ("", "ai.onnx"):
        return []
    try:
        current = onnx.defs.get_schema(node.op_type, opset, "").since_version
    except onnx.defs.SchemaError:
        return []
    attrs = {a.name for a in node.attribute}
    return sorted(s.since_version for s in onnx.defs.get_all_schemas_with_history()
                  if s.name == node.op_type and s.domain == "" and s.since_version > current and not s.deprecated
                  and attrs <= set(s.attributes))
