"""Elementwise programs as node attributes (the format is documented in codegen/kernels/fused.py).

The fusion passes build a program from the ONNX nodes they replace: each step names an op of our
elementwise table and refers to the fused node's inputs or to earlier steps by index, so the optimized
graph stays ONNX (webinfer domain) and the kernel is generated from our table, never from model text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import onnx_ir as ir

from ...opschema import HOST_MAX_ELEMENTS, WEBINFER_DOMAIN, elementwise_ops
from ._util import const

FLOAT_TYPES = {ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.DOUBLE}
OPS = elementwise_ops()  # ONNX ops of the elementwise table
# webinfer-domain activations written by fuse_activations.py; they fuse like their ONNX namesakes.
OUR_ACTIVATIONS = elementwise_ops(WEBINFER_DOMAIN)
_STEP_ATTR = re.compile(r"s(\d+)_(.+)")


def fusable(node: ir.Node | None) -> bool:
    """An elementwise node of our table with one float output, or an int/bool one that is data for sure:
    int/bool math on a small static shape is usually shape arithmetic, which the lowering computes on the
    host (codegen/kernels/elementwise.host_elementwise), so it stays a node of its own."""
    if node is None or len(node.outputs) != 1:
        return False
    if not ((node.domain in ("", "ai.onnx") and node.op_type in OPS)
            or (node.domain == WEBINFER_DOMAIN and node.op_type in OUR_ACTIVATIONS)):
        return False
    if any(a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS) for a in node.attributes.values()):
        return False
    out = node.outputs[0]
    return out.dtype in FLOAT_TYPES or (out.dtype in DATA_TYPES and not _maybe_host(out.shape))


DATA_TYPES = {ir.DataType.INT32, ir.DataType.INT64, ir.DataType.BOOL}


def _maybe_host(shape: ir.Shape | None) -> bool:
    """Whether a value of this shape may be host shape arithmetic: unknown, or static and at most
    ``HOST_MAX_ELEMENTS`` elements (a symbolic dim or a bigger tensor always runs on the GPU)."""
    if shape is None or not all(isinstance(d, int) for d in shape.dims):
        return shape is None
    return int(np.prod(shape.dims, dtype=np.int64)) <= HOST_MAX_ELEMENTS


def is_literal(value: ir.Value) -> bool:
    """A constant of one element: the kernel writes it as a literal, it needs no binding."""
    c = const(value)
    return c is not None and c.size == 1 and c.dtype.kind in "fiub"


@dataclass
class Program:
    ops: list[str] = field(default_factory=list)
    arity: list[int] = field(default_factory=list)
    args: list[int] = field(default_factory=list)
    attrs: list[dict] = field(default_factory=list)  # per step: name -> ir.Attr (original names)
    n_in: int = 0

    @classmethod
    def from_nodes(cls, steps: list[ir.Node], inputs: list[ir.Value]) -> "Program":
        """``steps`` in graph order; ``inputs`` the distinct values they read from outside."""
        ref = {id(v): i for i, v in enumerate(inputs)}
        p = cls(n_in=len(inputs))
        for j, node in enumerate(steps):
            p.ops.append(node.op_type)
            p.arity.append(len(node.inputs))
            p.args.extend(-1 if v is None else ref[id(v)] for v in node.inputs)
            p.attrs.append(dict(node.attributes))
            ref[id(node.outputs[0])] = len(inputs) + j
        return p

    @classmethod
    def from_node(cls, node: ir.Node, n_in: int) -> "Program":
        a = node.attributes
        p = cls(list(a["ops"].as_strings()), list(a["arity"].as_ints()), list(a["args"].as_ints()), n_in=n_in)
        p.attrs = [{} for _ in p.ops]
        for name, attr in a.items():
            m = _STEP_ATTR.fullmatch(name)
            if m:
                p.attrs[int(m.group(1))][m.group(2)] = attr
        return p

    def remap(self, mapping: list[int], n_in: int) -> "Program":
        """The same steps over new inputs: old input ``i`` becomes ``mapping[i]``, of ``n_in`` inputs."""
        def move(r: int) -> int:
            return -1 if r < 0 else mapping[r] if r < self.n_in else r - self.n_in + n_in

        return Program(list(self.ops), list(self.arity), [move(r) for r in self.args], self.attrs, n_in)

    def to_attributes(self) -> list[ir.Attr]:
        out = [ir.AttrStrings("ops", self.ops), ir.AttrInt64s("arity", self.arity), ir.AttrInt64s("args", self.args)]
        for j, attrs in enumerate(self.attrs):
            out.extend(ir.Attr(f"s{j}_{name}", a.type, a.value) for name, a in attrs.items())
        return out


def external_inputs(members: list[ir.Node]) -> list[ir.Value]:
    """Distinct values read by ``members`` and produced outside them, in first-use order."""
    inside = {id(n.outputs[0]) for n in members}
    seen, out = set(), []
    for n in members:
        for v in n.inputs:
            if v is not None and id(v) not in inside and id(v) not in seen:
                seen.add(id(v))
                out.append(v)
    return out


def bound_count(values: list[ir.Value]) -> int:
    """How many of ``values`` need a storage binding (single-element constants are literals)."""
    return sum(not is_literal(v) for v in values)


def use_webinfer_domain(model: ir.Model) -> None:
    model.opset_imports.setdefault(WEBINFER_DOMAIN, 1)


def scalar(value: ir.Value | None) -> float | None:
    """The float value of a single-element constant, else None."""
    c = const(value) if value is not None else None
    if c is None or c.size != 1:
        return None
    return float(np.asarray(c).reshape(-1)[0])
