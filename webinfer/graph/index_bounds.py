"""Which graph inputs are indices into a table, and how many rows the table has (token ids into an embedding).

An index outside the table is an error in ONNX (onnxruntime: "indices element out of data bounds"), but a GPU
gather would read some other row and generate silently. The build records, for every graph input that reaches
a Gather's indices unchanged (through casts and views), the size of the gathered axis; the runtime checks fed
values against it on the host (`manifest["index_bounds"]`), which costs a pass over a few ids.
"""

from __future__ import annotations

import onnx_ir as ir

_VALUE_PRESERVING = {"Cast", "Reshape", "Unsqueeze", "Squeeze", "Identity", "Flatten"}


def _graph_input_of(value: ir.Value) -> ir.Value | None:
    for _ in range(8):
        if value.is_graph_input():
            return value
        node = value.producer()
        if node is None or node.op_type not in _VALUE_PRESERVING or node.domain not in ("", "ai.onnx"):
            return None
        value = node.inputs[0]
    return None


def input_index_bounds(model: ir.Model) -> dict[str, int]:
    """graph input name -> the smallest row count of the tables it indexes (static axes only)."""
    bounds: dict[str, int] = {}
    for node in model.graph:
        gather = node.op_type == "Gather" and node.domain in ("", "ai.onnx")
        quantized = node.op_type == "GatherBlockQuantized" and node.domain == "com.microsoft"  # rows stay rows
        if not (gather or quantized) or len(node.inputs) < 2:
            continue
        data, indices = node.inputs[0], node.inputs[1]
        source = _graph_input_of(indices) if indices is not None else None
        if source is None or data is None or data.shape is None or source.name is None:
            continue
        axis_attr = node.attributes.get("axis" if gather else "gather_axis")
        axis = axis_attr.as_int() if axis_attr is not None else 0
        axis = axis + len(data.shape) if axis < 0 else axis
        rows = data.shape[axis] if 0 <= axis < len(data.shape) else None
        if isinstance(rows, int):
            bounds[source.name] = min(rows, bounds.get(source.name, rows))
    return bounds
