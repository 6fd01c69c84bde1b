"""Shape inference over symbolic dims, with the values of small integer tensors (data propagation).

Exporters compute shapes at run time: ``q.reshape(Concat(Shape(x)[0], Shape(x)[1], -1, 64))``, a scale
``1 / Sqrt(Cast(Shape(k)[-1:]))``, a slice end ``Shape(x)[-1] // 2``. ONNX's own inference loses these on
symbolic dims (the -1 of a reshape over [batch, seq, 256] becomes an unknown dim), so the rewrites that
need a head count or a constant scale cannot see them. Here every value gets a shape of ``dims.Dim``
(ints and polynomials over the graph inputs' dim names, None where unknown) and every small integer
tensor its elements as dims, so ``[batch, seq*4*64] -> [batch, seq, -1, 64]`` gives ``[batch, seq, 4, 64]``
and ``Shape(k)[-1]`` on a static last dim gives 64.

The ops that carry shapes as data (Shape, Gather, Slice, Concat, Reshape, Expand, arithmetic, ...) are
evaluated here with ``webinfer.dims``; every other op goes through ``onnx.shape_inference`` one node at a
time, our dims passed as dim params. ``infer(model)`` writes the shapes back onto the onnx-ir values;
``fold_static(model)`` then replaces each integer value whose elements are all known by a constant.
"""

from __future__ import annotations

import re

import numpy as np
import onnx
import onnx_ir as ir

from .. import dims as D
from .. import shape_ops
from ..dims import Dim
from ..opschema import HOST_MAX_ELEMENTS
from . import ml_shapes
from .shape_rules import RULES as _RULES
from .shape_rules import const as _const

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")




def dim_from_ir(d) -> Dim | None:
    """An onnx-ir dim as a ``dims.Dim``: ``"past + seq"``-style names become polynomials."""
    if isinstance(d, int):
        return d if d >= 0 else None  # (Paddle's exporter declares -1 for a dim of any size)
    text = d.value if isinstance(d, ir.SymbolicDim) else None
    if not text or text == "?":  # ("?": Paddle's unnamed dim, on several axes that need not be equal)
        return None
    text = str(text)
    if _NAME.match(text):
        return D.Sym.name(text)
    out: Dim = 0
    for term in text.split("+"):
        prod: Dim = 1
        for factor in term.split("*"):
            factor = factor.strip()
            if factor.isdigit():
                prod = D.mul(prod, int(factor))
            elif _NAME.match(factor):
                prod = D.mul(prod, D.Sym.name(factor))
            else:
                return D.Sym.name(text)
        out = D.add(out, prod)
    return out


def dim_to_ir(d: Dim | None):
    if isinstance(d, int):
        return d
    return ir.SymbolicDim(None if d is None else D.to_text(d))


class ShapeInference:
    """One forward walk over the main graph: ``shapes[value]`` (tuple of Dim/None, or None when the rank is
    unknown) and ``values[value]`` (flat elements of small integer tensors)."""

    def __init__(self, model: ir.Model):
        self.model = model
        self.opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx", 13))
        self.shapes: dict[ir.Value, tuple | None] = {}
        self.values: dict[ir.Value, list[Dim]] = {}
        self.dtypes: dict[ir.Value, ir.DataType | None] = {}
        self.open_squeezes: list[ir.Node] = []  # Squeezes without axes whose symbolic dims nothing declared
        self.squeeze_drop: set[ir.Node] = set()  # ... and those this walk drops them from (infer())

    # -- reading what is known ------------------------------------------------------------------
    def shape(self, v: ir.Value | None) -> tuple | None:
        if v is None:
            return None
        if v in self.shapes:
            return self.shapes[v]
        if v.shape is None:
            return None
        return tuple(dim_from_ir(d) for d in v.shape)

    def dtype(self, v: ir.Value | None) -> ir.DataType | None:
        if v is None:
            return None
        return self.dtypes.get(v) or v.dtype

    def value(self, v: ir.Value | None) -> list[Dim] | None:
        if v is None:
            return None
        if v in self.values:
            return self.values[v]
        array = _const(v)
        if array is not None and array.dtype.kind in "iub" and array.size <= HOST_MAX_ELEMENTS:
            return [int(x) for x in array.reshape(-1)]
        return None

    def static_value(self, v: ir.Value | None) -> list[int] | None:
        vals = self.value(v)
        return vals if vals is not None and D.is_static(vals) else None

    # -- the walk -------------------------------------------------------------------------------
    def input_dim_names(self) -> set[str]:
        """The names of the graph inputs' symbolic dims (a traced export names its outputs' dynamic axes so)."""
        return {d.value for v in self.model.graph.inputs if v.shape is not None for d in v.shape
                if isinstance(getattr(d, "value", None), str)}

    def run(self) -> "ShapeInference":
        for node in self.model.graph:
            if node.domain == "ai.onnx.ml":
                self._ml(node)
                continue
            if node.domain not in ("", "ai.onnx"):
                continue
            try:
                self.node(node)
            except (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError,
                    onnx.shape_inference.InferenceError, onnx.checker.ValidationError, onnx.defs.SchemaError):
                pass  # an op we cannot reason about keeps whatever the exporter declared
        return self

    def node(self, node: ir.Node) -> None:
        rule = _RULES.get(node.op_type)
        result = rule(self, node) if rule is not None else None
        if result is None:
            result = self._onnx(node)
        else:
            self._rule_dtypes(node)
        shapes, values = result
        for i, out in enumerate(node.outputs):
            if i < len(shapes) and shapes[i] is not None:
                self.shapes[out] = tuple(shapes[i])
            if values and i < len(values) and values[i] is not None and len(values[i]) <= HOST_MAX_ELEMENTS:
                self.values[out] = list(values[i])
                if out not in self.shapes or self.shapes[out] is None:
                    self.shapes[out] = (len(values[i]),)

    def _ml(self, node: ir.Node) -> None:
        """A classic-ML op's outputs (graph/ml_shapes.py), where its input shape is known."""
        for out, (shape, dtype) in zip(node.outputs, ml_shapes.infer_ml(self, node) or ()):
            if shape is not None:
                self.shapes[out] = tuple(shape)
            if dtype is not None and out.dtype is None:
                self.dtypes[out] = dtype

    def _rule_dtypes(self, node: ir.Node) -> None:
        """Output types of the ops our rules evaluate (ONNX's inference, which would set them, is skipped)."""
        out = node.outputs[0]
        if self.dtype(out) is not None:
            return
        if node.op_type in ("Shape", "Size"):
            self.dtypes[out] = ir.DataType.INT64
        elif node.op_type in shape_ops.BOOL_OPS:
            self.dtypes[out] = ir.DataType.BOOL
        else:
            source = node.inputs[1] if node.op_type == "Where" else node.inputs[0]
            if self.dtype(source) is not None:
                self.dtypes[out] = self.dtype(source)

    def _onnx(self, node: ir.Node):
        """ONNX's per-node inference, our dims passed as dim params and static small values as data."""
        schema = onnx.defs.get_schema(node.op_type, self.opset, "")
        proto = ir.serde.serialize_node(node)
        texts: dict[str, Dim] = {}
        types, data = {}, {}
        for v, name in zip(node.inputs, proto.input):
            if v is None or not name:
                continue
            dt = self.dtype(v)
            shape = self.shape(v)
            if dt is None:
                return [], []
            dims = None
            if shape is not None:
                dims = []
                for d in shape:
                    if d is None:
                        dims.append(None)
                    elif isinstance(d, int):
                        dims.append(d)
                    else:
                        texts[D.to_text(d)] = d
                        dims.append(D.to_text(d))
            types[name] = onnx.helper.make_tensor_type_proto(int(dt), dims)
            array = _const(v)
            vals = self.static_value(v)
            if array is None and vals is not None and shape is not None and D.is_static(shape):
                array = np.array(vals, dtype=dt.numpy()).reshape([int(d) for d in shape])
            if array is not None and array.size <= 4096:
                data[name] = onnx.numpy_helper.from_array(array, name)
        opsets = [onnx.helper.make_opsetid("", self.opset)]
        outs = onnx.shape_inference.infer_node_outputs(schema, proto, types, data, opset_imports=opsets)
        shapes = []
        for v, name in zip(node.outputs, proto.output):
            t = outs.get(name)
            if t is None or not t.HasField("tensor_type"):
                shapes.append(None)
                continue
            if t.tensor_type.elem_type and self.dtype(v) is None:
                self.dtypes[v] = ir.DataType(t.tensor_type.elem_type)
            if not t.tensor_type.HasField("shape"):
                shapes.append(None)
                continue
            dims = []
            for d in t.tensor_type.shape.dim:
                if d.HasField("dim_value"):
                    dims.append(int(d.dim_value))
                elif d.HasField("dim_param"):
                    dims.append(texts.get(d.dim_param) or dim_from_ir(ir.SymbolicDim(d.dim_param)))
                else:
                    dims.append(None)
            shapes.append(tuple(dims))
        return shapes, []

    # -- writing back ---------------------------------------------------------------------------
    def write_back(self) -> None:
        """Onto the onnx-ir values: our dims where known, the exporter's where we know nothing better."""
        graph = self.model.graph
        for node in graph:
            for out in node.outputs:
                if out in self.dtypes and out.dtype is None:
                    out.dtype = self.dtypes[out]
                shape = self.shapes.get(out)
                if shape is None:
                    continue
                old = out.shape
                if old is not None and len(old) == len(shape):
                    merged = [n if n is not None else dim_from_ir(o) for n, o in zip(shape, old)]
                else:
                    merged = list(shape)
                out.shape = ir.Shape([dim_to_ir(d) for d in merged])


def infer(model: ir.Model) -> ShapeInference:
    """Infer shapes (and small integer values) of the main graph and write the shapes onto its values.

    A Squeeze without axes over a symbolic dim has a rank that depends on the dim's value; where nothing near it
    declares a rank, its symbolic dims are kept, unless dropping them (as the exporter, tracing at 1, did) is
    what gives the graph outputs their declared ranks: the few such Squeezes' choices are tried until they do."""
    si = ShapeInference(model).run()
    if si.open_squeezes and not _output_ranks_match(si) and len(si.open_squeezes) <= 4:
        nodes = list(si.open_squeezes)
        for mask in range(1, 1 << len(nodes)):
            trial = ShapeInference(model)
            trial.squeeze_drop = {n for i, n in enumerate(nodes) if mask >> i & 1}
            trial.run()
            if _output_ranks_match(trial):
                si = trial
                break
    si.write_back()
    return si


def _output_ranks_match(si: ShapeInference) -> bool:
    for v in si.model.graph.outputs:
        got = si.shapes.get(v)
        if v.shape is not None and got is not None and len(got) != len(v.shape):
            return False
    return True


def fold_static(model: ir.Model) -> int:
    """Replace every computed integer value whose elements are all known (``Shape(x)[-1]`` on a static dim,
    ``Concat(Shape(a)[0:1], [4])`` on a static batch) by a constant; returns how many were replaced."""
    from .passes._util import new_initializer, replace_value

    si = infer(model)
    graph = model.graph
    replaced = 0
    for node in list(graph):
        if node.op_type == "Constant":
            continue
        for out in node.outputs:
            vals = si.values.get(out)
            shape = si.shapes.get(out)
            dt = si.dtype(out)
            if vals is None or shape is None or not D.is_static(vals) or not D.is_static(shape) or dt is None:
                continue
            if not (dt.is_integer() or dt == ir.DataType.BOOL) or not out.uses() and not out.is_graph_output():
                continue
            array = np.array(vals, dtype=dt.numpy()).reshape([int(d) for d in shape])
            const = new_initializer(graph, array, (out.name or "shape") + "_static")
            if replace_value(graph, out, const):
                replaced += 1
    return replaced


__all__ = ["ShapeInference", "infer", "fold_static", "dim_from_ir", "dim_to_ir"]
