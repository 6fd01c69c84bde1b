"""Loop counters kept by hand become expressions of the iteration number, known while lowering.

Paddle exports ``for i in range(n): x[:, i] = ...`` (SLANet's table decoder, attention OCR heads) as a Loop that
carries ``i`` itself: it starts at a constant, grows by 1.0 through a float Cast each iteration, and the body
slices and scatters at ``[i, min(n, i + 1))``. Carried, ``i`` is data on the GPU and the Slice's bounds are
unknown at build time. It equals ``v0 + step * iter_num``, an expression of the loop's iteration dim like any
symbolic dim: every integer value of the body computed from the counter by value-preserving steps (Identity,
Cast, Reshape, Squeeze, Unsqueeze, Flatten; Add or Sub of an integral constant) is replaced by that expression
plus its offset. Float steps preserve the value while it stays below 2**24, checked against the Loop's constant
trip count; without one, only integer steps are followed. The Loop node records its counters
(``metadata_props["webinfer.loop_counters"]``: carried index -> [v0, step]) so that lowering gives the Loop's
final value as ``v0 + step * iterations`` too (a slice after the loop up to the step the decoder stopped at).
"""

from __future__ import annotations

import json

import numpy as np
import onnx_ir as ir

from ._util import const, replace_value

FLOAT_EXACT = 1 << 24
COUNTERS = "webinfer.loop_counters"
VIEWS = {"Identity", "Cast", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Add", "Sub"}


def run(model: ir.Model) -> int:
    loops = [n for n in ir.traversal.RecursiveGraphIterator(model.graph) if n.op_type == "Loop" and n.domain == ""]
    return sum(_loop(n) for n in loops)


def _loop(node: ir.Node) -> int:
    body = node.attributes["body"].as_graph() if "body" in node.attributes else None
    if body is None or len(body.inputs) != len(node.inputs) or len(body.inputs) < 2:
        return 0
    trip = const(node.inputs[0]) if node.inputs[0] is not None else None
    bound = int(trip.reshape(-1)[0]) if trip is not None and trip.size == 1 else None
    done, counters = 0, {}
    for j in range(2, len(node.inputs)):
        init = const(node.inputs[j])
        if init is None or init.size != 1 or init.dtype.kind not in "iu":
            continue
        v0 = int(init.reshape(-1)[0])
        traced = _trace(body, body.inputs[j], init.ndim, ir.DataType.from_numpy(init.dtype))
        out = body.outputs[j - 1]
        if out not in traced or not traced[out][2].is_integer() or traced[out][1] != init.ndim:
            continue
        step = traced[out][0]
        ints = {v: t for v, t in traced.items() if t[2].is_integer() and (v.uses() or v.is_graph_output())}
        if any(t[3] for t in ints.values()) and not _exact(v0, step, bound, [t[0] for t in ints.values()]):
            continue
        first = body[0]
        mul = ir.node("Mul", [body.inputs[0], _constant(body, first, np.array(step, np.int64))])
        base = ir.node("Add", [mul.outputs[0], _constant(body, first, np.array(v0, np.int64))])
        body.insert_before(first, [mul, base])
        done += _replace(body, base.outputs[0], base, ints)
        counters[j - 2] = [v0, step]
        final = node.outputs[j - 2]  # after the loop: its derived integers from the final value, in integers
        after = {v: t for v, t in _trace(node.graph, final, init.ndim, traced[out][2]).items()
                 if v is not final and t[2].is_integer() and (v.uses() or v.is_graph_output())}
        if after and node.graph is not None and _exact(v0, step, bound, [t[0] for t in after.values()]):
            cast = ir.node("Cast", [final], attributes={"to": int(ir.DataType.INT64)})
            scalar = ir.node("Squeeze", [cast.outputs[0]])  # (one element: a scalar)
            node.graph.insert_after(node, [cast, scalar])
            done += _replace(node.graph, scalar.outputs[0], scalar, after)
    if counters:
        node.metadata_props[COUNTERS] = json.dumps(counters)
    return done


def _exact(v0: int, step: int, bound: int | None, offsets: list[int]) -> bool:
    """Whether every value the float steps carry stays an exact float32 integer (|v| < 2**24)."""
    if bound is None:
        return False
    return all(max(abs(v0 + off), abs(v0 + off + step * bound)) < FLOAT_EXACT for off in offsets)


def _trace(body: ir.Graph, start: ir.Value, rank: int, dtype: ir.DataType) -> dict:
    """value -> (offset from the counter, rank, dtype, whether a float step lies between) for the body's values
    that equal the counter plus a constant."""
    seen = {start: (0, rank, dtype, False)}
    work = [start]
    while work:
        v = work.pop()
        off, rank, dtype, via_float = seen[v]
        for use in list(v.uses()):
            node, idx = use[0], use[1]
            if node.graph is not body or node.domain != "" or node.op_type not in VIEWS or len(node.outputs) != 1:
                continue
            got = _step(node, idx, off, rank, dtype)
            out = node.outputs[0]
            if got is None or out in seen:
                continue
            o_off, o_rank, o_dtype = got
            seen[out] = (o_off, o_rank, o_dtype, via_float or o_dtype.is_floating_point())
            work.append(out)
    return seen


def _step(node: ir.Node, idx: int, off: int, rank: int, dtype: ir.DataType):
    op = node.op_type
    if op in ("Add", "Sub"):
        other = const(node.inputs[1 - idx])
        if other is None or other.size != 1 or (op == "Sub" and idx != 0):
            return None
        c = float(other.reshape(-1)[0])
        if c != int(c):
            return None
        return off + (int(c) if op == "Add" else -int(c)), max(rank, other.ndim), dtype
    if idx != 0:
        return None
    if op == "Identity":
        return off, rank, dtype
    if op == "Cast":
        to = ir.DataType(node.attributes["to"].as_int())
        return (off, rank, to) if to.is_integer() or to.is_floating_point() else None
    if op == "Reshape":
        shape = const(node.inputs[1]) if len(node.inputs) > 1 else None
        if shape is None or any(int(s) not in (1, -1) for s in shape.reshape(-1)):
            return None
        return off, int(shape.size), dtype
    if op == "Flatten":
        return off, 2, dtype
    axes = const(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] is not None else None
    if axes is None and "axes" in node.attributes:
        axes = np.array(node.attributes["axes"].as_ints())
    if op == "Unsqueeze":
        return (off, rank + int(axes.size), dtype) if axes is not None else None
    return off, (0 if axes is None else rank - int(axes.size)), dtype  # Squeeze


def _replace(graph: ir.Graph, base: ir.Value, after: ir.Node, ints: dict) -> int:
    """Each traced integer value becomes ``Cast(base + offset)`` (``base``: the counter, an int64 scalar made by
    ``after``) in its rank and dtype."""
    count = 0
    for v, (off, rank, dtype, _) in ints.items():
        add = ir.node("Add", [base, _constant(graph, after, np.full([1] * rank, off, np.int64), before=False)])
        nodes = [add]
        if dtype != ir.DataType.INT64:
            nodes.append(ir.node("Cast", [add.outputs[0]], attributes={"to": int(dtype)}))
        graph.insert_after(add.inputs[1].producer(), nodes)
        new = nodes[-1].outputs[0]
        new.dtype, new.shape = dtype, ir.Shape([1] * rank)
        count += replace_value(graph, v, new)
    return count


def _constant(graph: ir.Graph, at: ir.Node, array: np.ndarray, before: bool = True) -> ir.Value:
    node = ir.node("Constant", [], attributes={"value": ir.tensor(array)})
    (graph.insert_before if before else graph.insert_after)(at, node)
    out = node.outputs[0]
    out.dtype, out.shape = ir.DataType.from_numpy(array.dtype), ir.Shape(array.shape)
    return out
