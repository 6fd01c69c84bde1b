"""Classic-ML outputs that are not numeric tensors, rewritten at import so the GPU computes numbers and the run
side formats them (runtime/ml_outputs.py), as onnxruntime returns them:

- a classifier's string labels (``classlabels_strings``) whose label output only reaches graph outputs (through
  Identity): the classifier computes the class index instead (int labels 0..C-1) and the output is marked
  ``labels``: the run side maps index -> label;
- ZipMap (a sequence of {label: probability} maps) as a graph output: replaced by Identity of its probability
  tensor, the output marked ``zipmap`` with its labels: the run side forms one dict per row.

The marks go to the manifest's ``output_formats`` block (the labels stored as data, never in WGSL). Anything else
holding a map stays as it is and importer.py refuses it in one line.
"""

from __future__ import annotations

import json

import onnx
from onnx import TensorProto, helper

ML = "ai.onnx.ml"
METADATA_KEY = "webinfer.output_formats"
# classifier -> (its string labels attribute, the int labels attribute that replaces it)
_CLASSIFIERS = {"LinearClassifier": ("classlabels_strings", "classlabels_ints"),
                "SVMClassifier": ("classlabels_strings", "classlabels_ints"),
                "TreeEnsembleClassifier": ("classlabels_strings", "classlabels_int64s")}


def _attr(node: onnx.NodeProto, name: str):
    return next((helper.get_attribute_value(a) for a in node.attribute if a.name == name), None)


def _set_tensor_type(graph: onnx.GraphProto, name: str, elem: int, dims: list | None) -> None:
    """Give output ``name`` a tensor type (its value_info entries dropped: shapes are inferred again)."""
    for v in graph.output:
        if v.name == name:
            v.type.CopyFrom(helper.make_tensor_type_proto(elem, dims))
    keep = [v for v in graph.value_info if v.name != name]
    del graph.value_info[:]
    graph.value_info.extend(keep)


def _label_outputs(graph: onnx.GraphProto, value: str) -> tuple[list[str], list[str]] | None:
    """(the graph outputs ``value`` reaches through Identity nodes, every value on the way), or None when any
    other node reads it."""
    outputs = {v.name for v in graph.output}
    found, seen, todo = [], [], [value]
    while todo:
        v = todo.pop()
        seen.append(v)
        if v in outputs:
            found.append(v)
        for n in graph.node:
            if v in n.input:
                if n.op_type != "Identity" or n.domain not in ("", "ai.onnx"):
                    return None
                todo.append(n.output[0])
    return found, seen


def _string_labels(graph: onnx.GraphProto, formats: list) -> None:
    for node in graph.node:
        if node.domain != ML or node.op_type not in _CLASSIFIERS:
            continue
        strings_attr, ints_attr = _CLASSIFIERS[node.op_type]
        labels = _attr(node, strings_attr)
        if not labels or not node.output or not node.output[0]:
            continue
        paths = _label_outputs(graph, node.output[0])
        if paths is None:
            continue  # read by another node: the kernel refuses string labels in one line
        reached, seen = paths
        texts = [s.decode("utf-8", "replace") if isinstance(s, bytes) else str(s) for s in labels]
        keep = [a for a in node.attribute if a.name != strings_attr]
        del node.attribute[:]
        node.attribute.extend(keep)
        node.attribute.append(helper.make_attribute(ints_attr, list(range(len(texts)))))
        for v in seen:  # the label and its Identity copies carry class indices now
            _set_tensor_type(graph, v, TensorProto.INT64, [None])
        formats.extend({"output": out, "kind": "labels", "labels": texts} for out in reached)


def _zipmaps(graph: onnx.GraphProto, formats: list) -> None:
    outputs = {v.name for v in graph.output}
    read = {i for n in graph.node for i in n.input}
    for node in graph.node:
        if node.domain != ML or node.op_type != "ZipMap" or node.output[0] not in outputs or node.output[0] in read:
            continue
        labels = _attr(node, "classlabels_strings") or _attr(node, "classlabels_int64s") or []
        labels = [s.decode("utf-8", "replace") if isinstance(s, bytes) else int(s) for s in labels]
        name = node.output[0]
        node.op_type, node.domain = "Identity", ""
        del node.attribute[:]
        _set_tensor_type(graph, name, TensorProto.FLOAT, [None, len(labels)])
        formats.append({"output": name, "kind": "zipmap", "labels": labels})


def rewrite(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with its string labels and ZipMap outputs rewritten (a copy when anything changes); the formats
    are in the model's ``metadata_props[METADATA_KEY]``."""
    g = model.graph
    has_zip = any(n.domain == ML and n.op_type == "ZipMap" for n in g.node)
    has_str = any(n.domain == ML and n.op_type in _CLASSIFIERS and _attr(n, _CLASSIFIERS[n.op_type][0])
                  for n in g.node)
    if not (has_zip or has_str):
        return model
    model = onnx.ModelProto.FromString(model.SerializeToString())
    formats: list = []
    _string_labels(model.graph, formats)
    _zipmaps(model.graph, formats)
    if formats:
        model.metadata_props.add(key=METADATA_KEY, value=json.dumps(formats))
    return model


def manifest_block(ir_model) -> dict:
    """``{"output_formats": [...]}`` for the formats recorded at import (outputs still in the graph), or {}."""
    text = ir_model.metadata_props.get(METADATA_KEY)
    names = {v.name for v in ir_model.graph.outputs}
    formats = [f for f in json.loads(text) if f["output"] in names] if text else []
    return {"output_formats": formats} if formats else {}
