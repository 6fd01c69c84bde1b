"""What a conformance case is about, read from its model alone: the permanent reason it can never pass
(``categorize``), the op it tests (``main_op``) and the webinfer kernel family that lowers that op.
Used by run.py for expected.tsv and its summaries."""

from __future__ import annotations

from pathlib import Path

import onnx

from webinfer.opschema import random_ops

NODE_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "node"

# -- static look at a model: permanent failure categories --------------------------------------------
_BAD_DTYPES = {
    onnx.TensorProto.STRING: "dtype-string",
    onnx.TensorProto.COMPLEX64: "dtype-complex",
    onnx.TensorProto.COMPLEX128: "dtype-complex",
}
_RANDOM_OPS = random_ops()


def _type_category(tp: onnx.TypeProto) -> str | None:
    kind = tp.WhichOneof("value")
    if kind == "tensor_type":
        return _BAD_DTYPES.get(tp.tensor_type.elem_type)
    if kind == "sequence_type":  # sequences and optionals of known structure are supported: their elements
        return _type_category(tp.sequence_type.elem_type)
    if kind == "optional_type":
        return _type_category(tp.optional_type.elem_type)
    if kind in ("map_type", "sparse_tensor_type"):
        return "map-or-sparse"
    return None


def _walk_nodes(graph: onnx.GraphProto):
    for node in graph.node:
        yield node
        for a in node.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield from _walk_nodes(g)


def categorize(case: str, model: onnx.ModelProto) -> str:
    """Why this case can never pass (a permanent category), or 'todo'."""
    g = model.graph
    ops = list(_walk_nodes(g))
    domains = {n.domain for n in ops}
    if "ai.onnx.preview.training" in domains:
        return "training"
    types = [v.type for v in list(g.input) + list(g.output) + list(g.value_info)]
    cats = [c for c in map(_type_category, types) if c]
    cats += [_BAD_DTYPES[t.data_type] for t in g.initializer if t.data_type in _BAD_DTYPES]
    for n in ops:
        for a in n.attribute:
            if a.name in ("to", "dtype") and a.type == onnx.AttributeProto.INT and a.i in _BAD_DTYPES:
                cats.append(_BAD_DTYPES[a.i])
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type in _BAD_DTYPES:
                cats.append(_BAD_DTYPES[a.t.data_type])
    if cats:
        return sorted(cats)[0]
    types = {n.op_type for n in ops}
    if types & _RANDOM_OPS or case.startswith("test_training_dropout"):
        return "random"
    return "todo"


def case_info(case: str) -> tuple[str, str]:
    """(main op, permanent category) of a case, from its model."""
    model = onnx.load(str(NODE_DIR / case / "model.onnx"), load_external_data=False)
    return main_op(case, model), categorize(case, model)


def _squash(name: str) -> str:
    return name.lower().replace("_", "")


_OP_NAMES: list[str] | None = None


def main_op(case: str, model: onnx.ModelProto) -> str:
    """The op a case tests: the longest op name the case name starts with, else its single node's op."""
    global _OP_NAMES
    if _OP_NAMES is None:
        _OP_NAMES = sorted({s.name for s in onnx.defs.get_all_schemas_with_history()}, key=len, reverse=True)
    key = _squash(case[len("test_"):])
    for name in _OP_NAMES:
        if key.startswith(_squash(name)):
            return name
    ops = [n.op_type for n in model.graph.node]
    return ops[0] if len(set(ops)) == 1 else "(composite)"


def family_of(op: str) -> str:
    """The webinfer kernel module that lowers ``op``, or '(none)'."""
    from webinfer.codegen.registry import LOWERINGS, load_all

    load_all()
    fn = LOWERINGS.get(op)
    return fn.__module__.rsplit(".", 1)[-1] if fn else "(none)"
