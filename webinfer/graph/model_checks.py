"""Checks on an ONNX model before it is converted, so a malformed file is named, not met as a library error.

The opset must be one the installed onnx knows (a future opset cannot be lowered with today's semantics),
every value must be defined once (SSA), and every initializer's data must hold what its shape needs. After
import, the inputs an operator's schema binds to one type parameter must have one element type (MatMul of a
float32 and a float64 is no ONNX model: onnxruntime refuses it, and lowering would pick one type silently).
"""

from __future__ import annotations

import math

import onnx
from onnx import TensorProto, helper, numpy_helper

from ..errors import WebinferError

# Element widths in bits where they are not numpy's itemsize (packed sub-byte types).
_BITS = {TensorProto.INT4: 4, TensorProto.UINT4: 4, TensorProto.FLOAT4E2M1: 4, TensorProto.INT2: 2,
         TensorProto.UINT2: 2}


def check_model(model: onnx.ModelProto, where: str) -> None:
    check_opset(model, where)
    check_single_definitions(model.graph, where)
    check_tensor_data(model, where)


def check_opset(model: onnx.ModelProto, where: str) -> None:
    newest = onnx.defs.onnx_opset_version()
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx") and not 1 <= o.version <= newest:
            raise WebinferError(f"{where}: ONNX opset {o.version} is not supported (opsets 1 to {newest} are)")


def check_single_definitions(graph: onnx.GraphProto, where: str) -> None:
    """Each value name is produced once: by a graph input, an initializer or one node output."""
    producer: dict[str, str] = {}
    inputs = {i.name for i in graph.input}
    for i in graph.input:
        _define(producer, i.name, "a graph input", where)
    for t in graph.initializer:
        if t.name in inputs:  # an initializer may give a graph input its default value
            continue
        _define(producer, t.name, "an initializer", where)
    for k, node in enumerate(graph.node):
        for out in node.output:
            if out:
                _define(producer, out, f"node {node.name or k!r} ({node.op_type})", where)


def _define(producer: dict, name: str, by: str, where: str) -> None:
    if name in producer:
        raise WebinferError(f"{where}: value {name!r} is produced twice, by {producer[name]} and by {by} "
                            "(ONNX values are defined once)")
    producer[name] = by


def check_tensor_data(model: onnx.ModelProto, where: str) -> None:
    for t in model.graph.initializer:
        _check_tensor(t, f"initializer {t.name!r}", where)
    for k, node in enumerate(model.graph.node):
        for a in node.attribute:
            if a.HasField("t"):
                _check_tensor(a.t, f"node {node.name or k!r} ({node.op_type}) attribute {a.name!r}", where)


def _check_tensor(t: TensorProto, what: str, where: str) -> None:
    dims = list(t.dims)
    if any(d < 0 for d in dims):
        raise WebinferError(f"{where}: {what} has a negative dim in its shape {dims}")
    if t.data_type in (TensorProto.STRING, TensorProto.UNDEFINED) or t.data_location == TensorProto.EXTERNAL:
        return
    count = math.prod(dims)
    if t.raw_data or (count and not _has_typed_data(t)):
        bits = _BITS.get(t.data_type) or 8 * _np_dtype(t.data_type).itemsize
        need = (count * bits + 7) // 8
        if len(t.raw_data) != need:
            raise WebinferError(f"{where}: {what} holds {len(t.raw_data)} bytes of data; its shape {dims} of "
                                f"{_dtype_name(t.data_type)} needs {need} (truncated?)")
        return
    try:
        numpy_helper.to_array(t)
    except Exception as e:
        raise WebinferError(f"{where}: {what}: its data does not fit its shape {dims} "
                            f"({type(e).__name__}: {str(e)[:100]})") from None


def _has_typed_data(t: TensorProto) -> bool:
    return any(len(getattr(t, f)) for f in ("float_data", "int32_data", "int64_data", "double_data",
                                           "uint64_data", "string_data"))


def _np_dtype(data_type: int):
    try:
        return helper.tensor_dtype_to_np_dtype(data_type)
    except Exception:
        raise WebinferError(f"unknown tensor data type {data_type}") from None


def _dtype_name(data_type: int) -> str:
    return _np_dtype(data_type).name


def symbolic_dim_names(model) -> list[str]:
    """The names of the symbolic dims of an onnx-ir model's graph inputs, as the lowerer names them (an
    unnamed dim is ``<input>_<axis>``): what ``--dim`` may fix."""
    inits = set(model.graph.initializers)
    names = []
    for v in model.graph.inputs:
        if v.name in inits or v.shape is None:
            continue
        for axis, d in enumerate(v.shape):
            if not isinstance(d, int):
                names.append(str(d.value) if getattr(d, "value", None) else f"{v.name}_{axis}")
    return list(dict.fromkeys(names))


def check_dim_names(model, dims: dict | None) -> None:
    """Every dim fixed by ``--dim`` is one the model has (a misspelt name must not be ignored silently)."""
    names = symbolic_dim_names(model)
    for name in dims or {}:
        if name not in names:
            have = ", ".join(names) or "none"
            raise WebinferError(f"--dim {name}: the model has no symbolic dim named {name!r} (its symbolic dims: "
                                f"{have})")


def check_type_constraints(model) -> None:
    """Refuse a node of the standard domain whose inputs bound to one type parameter of its schema (MatMul's
    A and B: T) have different known element types. ``model``: onnx-ir, after import (types inferred)."""
    opset = model.opset_imports.get("", None)
    for node in model.graph:
        if node.domain not in ("", "ai.onnx") or opset is None:
            continue
        try:
            schema = onnx.defs.get_schema(node.op_type, opset, "")
        except onnx.defs.SchemaError:
            continue  # no schema: the support check names the op
        bound: dict[str, tuple[str, object]] = {}
        formals, variadic = list(schema.inputs), onnx.defs.OpSchema.FormalParameterOption.Variadic
        for i, value in enumerate(node.inputs):
            k = min(i, len(formals) - 1)
            if k < 0 or (k < i and formals[k].option != variadic):
                continue
            formal = formals[k]
            name = f"{formal.name}[{i - k + 1}]" if formal.option == variadic else formal.name
            if value is None or value.dtype is None or (formal.option == variadic and not formal.is_homogeneous):
                continue
            seen = bound.setdefault(formal.type_str, (name, value.dtype))
            if seen[1] != value.dtype:
                what = f"{node.op_type} node {node.name!r}" if node.name else f"a {node.op_type} node"
                raise WebinferError(f"{what}: inputs {seen[0]} and {name} must have one type ({formal.type_str}), "
                                    f"got {_type_name(seen[1])} and {_type_name(value.dtype)}")


def _type_name(dtype) -> str:
    try:
        return str(dtype.numpy())
    except Exception:  # types numpy has no name for
        return dtype.name.lower()
