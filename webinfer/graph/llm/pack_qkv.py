"""One matmul for a decoder layer's q, k and v projections: ``webinfer.CachedAttention`` reads them from
one packed row.

After the KV-cache rewrite (kv_cache.py, gqa.py) an attention with ``bshd=1`` reads q, k and v as
[b, s, heads, d] views (Reshape) of three projections. When the three are MatMul(x, W) [+ bias] of the same
x with constant weights, every intermediate used once, they become MatMul(x, [Wq | Wk | Wv]) [+ bias]
viewed as [b, s, Hq + 2 Hkv, d], and the attention takes ``packed_qkv=1`` (codegen/kernels/
cached_attention.py): a decode step runs one GEMV over all the columns instead of three. Each dispatch costs
tens of microseconds on a software GPU and the small k/v GEMVs spread over few workgroups (docs/notes.md).
Weight quantization runs after this pass, on the merged weight; its blocks run along K within a column, so
the packed columns quantize exactly as they would apart. An export that packed them already (q, k and v
Slices or a three-way Split of one projection, as phi3's qkv_proj and GPT-2's c_attn) gets the same view of
that projection, without its Slice or Split kernels. Anything else (a q/k norm between projection and
attention, projections of different inputs) leaves the layer as it was.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ..passes import dce
from ..passes._util import (
    const,
    constant_projection,
    int_attr,
    new_initializer,
    onnx_op,
    replace_value,
    sole_consumer,
)

DOMAIN = "webinfer"


def _head_view(value: ir.Value) -> tuple[ir.Value, int, int] | None:
    """value = Reshape(p, [b, s, heads, d]) of a 3-D p with heads * d columns: (p, heads, d)."""
    rs = onnx_op(value, "Reshape")
    if rs is None or value.is_graph_output() or value.shape is None or len(value.shape) != 4:
        return None
    heads, d = value.shape[2], value.shape[3]
    p = rs.inputs[0]
    if not (isinstance(heads, int) and isinstance(d, int)) or p.shape is None or len(p.shape) != 3 \
            or p.shape[2] != heads * d:
        return None
    return p, heads, d


def _one_row(views: list, bounds: list[int]) -> ir.Value | None:
    """The exporter packed them already: q, k and v are Slices of one [b, s, total] tensor along its last axis,
    [bounds[0], bounds[1]), [bounds[1], bounds[2]), [bounds[2], total) (phi3's qkv_proj), or the three outputs
    of one Split of it (GPT-2's c_attn). That tensor, or None."""
    total, source = bounds[-1], None
    split = onnx_op(views[0][0], "Split")
    if split is not None:
        return _split_row(split, views, bounds)
    for (p, _, _), lo, hi in zip(views, bounds, bounds[1:]):
        sl = onnx_op(p, "Slice")
        if sl is None or sole_consumer(p) is None or len(sl.inputs) < 4:
            return None
        args = [const(i) for i in sl.inputs[1:]]
        data = sl.inputs[0]
        if any(a is None or a.size != 1 for a in args):
            return None
        start, end, axis, step = ([int(a.reshape(-1)[0]) for a in args] + [1])[:4]
        if data.shape is None or len(data.shape) != 3 or data.shape[2] != total or axis not in (-1, 2) \
                or step != 1 or start != lo or not (end == hi or (hi == total and end > total)):
            return None
        if source is not None and data is not source:
            return None
        source = data
    return source


def _data_read_once(value: ir.Value) -> bool:
    """Read by one node, apart from Shape nodes (which read no data)."""
    readers = [u.node for u in value.uses() if u.node.op_type != "Shape"]
    return len(readers) == 1 and not value.is_graph_output()


def _split_row(split: ir.Node, views: list, bounds: list[int]) -> ir.Value | None:
    """q, k and v are the outputs of ``split`` (of data [b, s, total], axis=-1), in that order, sized as
    ``bounds``. Shape readers of them (optimum's reshape targets) keep the Split, which then runs no kernel."""
    data, sizes = split.inputs[0], [hi - lo for lo, hi in zip(bounds, bounds[1:])]
    if [id(v[0]) for v in views] != [id(o) for o in split.outputs] or \
            not all(map(_data_read_once, split.outputs)):
        return None
    if data.shape is None or len(data.shape) != 3 or data.shape[2] != bounds[-1] or \
            int_attr(split, "axis", 0) not in (-1, 2):
        return None
    given = const(split.inputs[1]) if len(split.inputs) > 1 and split.inputs[1] is not None else None
    fits = given.reshape(-1).tolist() == sizes if given is not None else len(set(sizes)) == 1
    return data if fits else None


def _pack(graph: ir.Graph, node: ir.Node) -> bool:
    views = [_head_view(v) for v in node.inputs[:3]]
    if any(v is None for v in views):
        return False
    (hq, d), (hk, dk), (hv, dv) = ((v[1], v[2]) for v in views)
    if (dk, dv, hv) != (d, d, hk) or (hq, hk) != (int_attr(node, "q_heads", -1), int_attr(node, "kv_heads", -1)):
        return False
    heads, dtype = hq + 2 * hk, node.inputs[0].dtype
    b, s = node.inputs[0].shape[0], node.inputs[0].shape[1]
    order = {id(n): i for i, n in enumerate(graph)}
    anchor = min((v[0].producer() for v in views), key=lambda n: order[id(n)])

    def add_node(op: str, inputs: list, shape: list) -> ir.Value:  # before the first projection: its input is ready
        n = ir.Node("", op, inputs, num_outputs=1, name=f"{node.name}_qkv_{op.lower()}")
        graph.insert_before(anchor, n)
        n.outputs[0].dtype, n.outputs[0].shape = dtype, ir.Shape(shape)
        return n.outputs[0]

    packed = _one_row(views, [0, hq * d, (hq + hk) * d, heads * d])
    if packed is None:
        projections = [constant_projection(v[0]) for v in views]
        if any(p is None for p in projections) or len({id(p[0]) for p in projections}) != 1:
            return False
        ws = [p[1] for p in projections]
        if len({(w.shape[0], w.dtype) for w in ws}) != 1:
            return False
        packed = add_node("MatMul", [projections[0][0], new_initializer(graph, np.concatenate(ws, axis=1), "qkv_weight")],
                          [b, s, heads * d])
        if any(p[2] is not None for p in projections):
            bias = np.concatenate([p[2] if p[2] is not None else np.zeros(w.shape[1], w.dtype)
                                   for p, w in zip(projections, ws)])
            packed = add_node("Add", [packed, new_initializer(graph, bias, "qkv_bias")], [b, s, heads * d])
    rows = add_node("Reshape", [packed, new_initializer(graph, np.array([0, 0, heads, d], np.int64), "qkv_heads")],
                    [b, s, heads, d])
    for i, (start, count) in enumerate(((0, hq), (hq, hk), (hq + hk, hk))):
        view = node.inputs[i]
        node.replace_input_with(i, rows)
        if list(view.uses()):  # read elsewhere too (an exporter's Shape of k): those readers get a slice of
            # the packed rows, which is no kernel when only its shape is read
            ends = [new_initializer(graph, np.array([v], np.int64), f"qkv_{name}") for v, name in
                    ((start, "start"), (start + count, "end"), (2, "axis"))]
            replace_value(graph, view, add_node("Slice", [rows, *ends], [b, s, count, d]))
    node.attributes["packed_qkv"] = ir.AttrInt64("packed_qkv", 1)
    return True


def run(model: ir.Model) -> int:
    """Pack the projections of every attention that allows it; returns the number of layers packed."""
    dce.run(model)  # the KV-cache rewrite leaves the old attention's nodes reading q, k and v
    packed = sum(_pack(model.graph, node) for node in list(model.graph)
                 if node.domain == DOMAIN and node.op_type == "CachedAttention"
                 and int_attr(node, "bshd", 0) and not int_attr(node, "packed_qkv", 0))
    if packed:
        dce.run(model)  # the separate projections, before weight quantization would pack them too
    return packed
