"""Import an ONNX file: parse, check external-data paths, upgrade old opsets, convert to onnx-ir."""

from __future__ import annotations

import os

import onnx
import onnx_ir as ir
from onnx.external_data_helper import uses_external_data

from ..errors import WebinferError
from . import ml_outputs
from .model_checks import check_model

MIN_OPSET = 13


def load_proto(path: str, external: bool = True) -> onnx.ModelProto:
    """The parsed model, its external tensors read in (``external=False``: their paths checked, not read)."""
    if os.path.isdir(path):  # (an encoder-decoder export folder was recognised before: graph/seq2seq.py)
        raise WebinferError(f"{path}: a folder, not an .onnx file (a folder builds only as an encoder-decoder "
                            "export: encoder_model.onnx + decoder_model_merged.onnx or decoder_model.onnx and "
                            "decoder_with_past_model.onnx)")
    if not os.path.isfile(path):
        raise WebinferError(f"{path}: no such file")
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as e:  # protobuf's DecodeError and friends
        raise WebinferError(f"{path}: not a valid ONNX model ({type(e).__name__}: {str(e)[:120]})") from None
    if model.ir_version == 0 or not model.HasField("graph") or not model.graph.output:
        raise WebinferError(f"{path}: not a valid ONNX model (no graph or no outputs)")
    check_external_paths(model, os.path.dirname(os.path.abspath(path)), path)
    if external:
        load_external_data(model, os.path.dirname(os.path.abspath(path)), path)
    check_model(model, path)
    return model


def check_external_paths(model: onnx.ModelProto, base: str, where: str) -> None:
    """Refuse any external location that resolves outside the model's folder, or a missing file."""
    root = os.path.realpath(base)
    for tensor in _all_tensors(model):
        if not uses_external_data(tensor):
            continue
        info = {e.key: e.value for e in tensor.external_data}
        loc = info.get("location", "")
        full = os.path.realpath(os.path.join(root, loc))
        if os.path.isabs(loc) or os.path.commonpath([root, full]) != root:
            raise WebinferError(f"{where}: external data path {loc!r} leaves the model's folder; refused")
        if not os.path.isfile(full):
            raise WebinferError(f"{where}: external data file {loc!r} is missing")


def load_external_data(model: onnx.ModelProto, base: str, where: str) -> None:
    """Load external tensors (their paths checked first)."""
    check_external_paths(model, base, where)
    try:
        onnx.load_external_data_for_model(model, os.path.realpath(base))
    except Exception as e:
        raise WebinferError(f"{where}: cannot read external data ({e})") from None


def _external_initializers_only(model: onnx.ModelProto) -> bool:
    """Whether every external tensor is a main-graph initializer (what read_external_weights handles)."""
    return not any(uses_external_data(a.t) for n in model.graph.node for a in n.attribute if a.HasField("t"))


def read_external_weights(model: ir.Model, base: str, where: str) -> None:
    """Each external initializer read from its file into an array the graph owns, one at a time, never through
    the protobuf (whose arena would hold every weight until the last is dropped): a build's memory then holds a
    weight once, and frees it when a pass replaces it (a 2 GB+ model is external by necessity)."""
    import numpy as np

    root = os.path.realpath(base)
    for value in model.graph.initializers.values():
        t = value.const_value
        if not isinstance(t, ir.ExternalTensor):
            continue
        lazy = ir.ExternalTensor(t.location, t.offset, t.length, t.dtype, shape=t.shape, name=t.name, base_dir=root)
        try:
            array = np.array(lazy.numpy(), copy=True)  # (a view of the mmapped file, copied, then unmapped)
        except Exception as e:
            raise WebinferError(f"{where}: cannot read external data of {t.name!r} ({type(e).__name__}: "
                                f"{str(e)[:120]})") from None
        finally:
            lazy.release()
        value.const_value = ir.Tensor(array, dtype=t.dtype, name=t.name)


def _all_tensors(model: onnx.ModelProto):
    yield from model.graph.initializer
    for node in model.graph.node:
        for a in node.attribute:
            if a.HasField("t"):
                yield a.t


def upgrade_opset(model: onnx.ModelProto) -> onnx.ModelProto:
    """Models older than opset 13 go through onnx.version_converter (kept as-is if it cannot)."""
    version = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), MIN_OPSET)
    if version >= MIN_OPSET:
        return model
    try:
        return onnx.version_converter.convert_version(model, MIN_OPSET)
    except Exception:
        return model


def to_ir(model: onnx.ModelProto) -> ir.Model:
    model = ml_outputs.rewrite(model)  # ZipMap and string labels as outputs: formatted at run time
    _refuse_maps(model.graph)
    try:
        ir_model = ir.serde.deserialize_model(model)
    except Exception as e:
        raise WebinferError(f"cannot read the ONNX graph ({type(e).__name__}: {str(e)[:160]})") from None
    if not _in_order(ir_model.graph):  # (onnxruntime's quantizer appends nodes it adds; onnxruntime sorts)
        try:
            ir_model.graph.sort()
        except ValueError as e:
            raise WebinferError(f"the ONNX graph has a cycle ({str(e)[:160]})") from None
    return ir_model


def _in_order(graph: ir.Graph) -> bool:
    """Whether every node of the main graph comes after the nodes that produce its inputs."""
    seen = set()
    for node in graph:
        if any(v is not None and v.producer() is not None and v.producer() not in seen for v in node.inputs):
            return False
        seen.add(node)
    return True


def _holds_map(t: onnx.TypeProto) -> bool:
    kind = t.WhichOneof("value")
    if kind == "map_type":
        return True
    if kind in ("sequence_type", "optional_type"):
        return _holds_map(getattr(t, kind).elem_type)
    return False


def _refuse_maps(graph: onnx.GraphProto) -> None:
    """ONNX maps have no GPU form: a ZipMap graph output was rewritten before (graph/ml_outputs.py: formatted at
    run time); any other map (DictVectorizer's or CastMap's input, a ZipMap that another node reads) is refused in
    one line naming the value and the node that makes it, before onnx-ir is asked to read them."""
    producers = {out: n for n in graph.node for out in n.output}
    for v in [*graph.input, *graph.output, *graph.value_info]:
        if _holds_map(v.type):
            node = producers.get(v.name)
            by = f" (made by {node.domain + '.' if node.domain else ''}{node.op_type})" if node is not None else ""
            raise WebinferError(f"value {v.name!r}{by} is a map or a sequence of maps: webinfer has no map type "
                                "(only a ZipMap's graph output is supported, formatted at run time)")


def import_model(model) -> ir.Model:
    """Path or ModelProto -> onnx-ir model at opset >= 13 where the converter can do it."""
    if isinstance(model, (str, os.PathLike)):
        proto = load_proto(model, external=False)
        version = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), MIN_OPSET)
        if version >= MIN_OPSET and _external_initializers_only(proto):
            ir_model = to_ir(proto)
            del proto
            read_external_weights(ir_model, os.path.dirname(os.path.abspath(model)), str(model))
            return ir_model
        load_external_data(proto, os.path.dirname(os.path.abspath(model)), str(model))
    else:
        proto = model
        check_model(proto, "model")
    return to_ir(upgrade_opset(proto))
