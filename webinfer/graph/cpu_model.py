"""The CPU path's model (``build --cpu``): standard ONNX that onnxruntime (natively) and onnxruntime-web's wasm
backend (pages without WebGPU) run as they are.

- A plain model, or a decoder built for generation: the source model itself (the generation loop, KV cache
  fed back and sampling, is the CPU path's own: site/cpu-chat.mjs).
- ``--preprocess`` / ``--postprocess``: the source model with the SAME prologue and epilogue as the GPU graph
  (graph/prepost.py, from the same spec), where the prologue's one webinfer op, ``ImageResize``, is expanded
  into standard ops: the packed RGBA8 words unpacked with BitShift/BitwiseAnd, Resize (antialias, opset 18) to
  the size the kernel computes (codegen/kernels/image.py ``resized_size``), Slice for the centre crop. The
  image input and the outputs are the GPU graph's, so one feed serves both paths.

``weights`` stores the model's weights smaller (graph/cpu_weights.py: int4 MatMulNBits for an int4 artifact,
float16 storage) after the prologue and epilogue are added.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ..errors import WebinferError
from . import ml_outputs, prepost
from .passes._util import new_initializer

RESIZE_OPSET = 18  # Resize's antialias, BitwiseAnd


def cpu_model_bytes(proto, preprocess=None, postprocess=None, weights: str = "f32") -> bytes:
    """``proto``: the source onnx.ModelProto (external data read in). Returns the CPU model's bytes. Classic-ML
    ZipMap and string-label outputs are rewritten to tensors as for the GPU graph (graph/ml_outputs.py: the run
    side formats both paths' outputs alike; onnxruntime-web reads no non-tensor output)."""
    proto = ml_outputs.rewrite(proto)
    if preprocess is None and postprocess is None:
        return _stored(proto, weights).SerializeToString()
    import onnx
    from onnx import version_converter

    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 1)
    if preprocess is not None and opset < RESIZE_OPSET:
        try:
            proto = version_converter.convert_version(proto, RESIZE_OPSET)
        except Exception as e:  # (the converter raises several types)
            raise WebinferError(f"the CPU model: cannot convert the model from opset {opset} to "
                                f"{RESIZE_OPSET} for the image prologue ({str(e).splitlines()[0]}); build "
                                "without --cpu") from None
    model = ir.from_proto(proto)
    if preprocess is not None:
        prepost.add_image_prologue(model, preprocess)
        expand_image_resize(model)
    if postprocess is not None:
        prepost.add_classifier_epilogue(model, postprocess)
    out = ir.to_proto(model)
    onnx.checker.check_model(out)
    return _stored(out, weights).SerializeToString()


def _stored(proto, weights: str):
    if weights == "f32":
        return proto
    from .cpu_weights import quantize_cpu_model

    return quantize_cpu_model(proto, weights)


def expand_image_resize(model: ir.Model) -> None:
    """Replace each webinfer.ImageResize node by standard ops computing the same float [1, C, h, w] planes."""
    graph = model.graph
    for node in [n for n in graph if n.domain == prepost.DOMAIN and n.op_type == "ImageResize"]:
        nodes, out = _resize_nodes(graph, node)
        graph.insert_before(node, nodes)
        node.outputs[0].replace_all_uses_with(out)
        graph.remove(node, safe=True)
    if not any(n.domain == prepost.DOMAIN for n in graph):
        model.opset_imports.pop(prepost.DOMAIN, None)


def _attr(node: ir.Node, name: str, default=None):
    a = node.attributes.get(name)
    return default if a is None else a.value


def _resize_nodes(graph: ir.Graph, node: ir.Node) -> tuple[list[ir.Node], ir.Value]:
    channels = list(_attr(node, "channels"))
    made: list[ir.Node] = []

    def op(op_type, inputs, **attrs):
        attributes = [prepost.make_attr(k, v) for k, v in attrs.items()]
        made.append(ir.Node("", op_type, inputs, attributes=attributes, name=f"cpu_image_{len(made)}",
                            num_outputs=1))
        return made[-1].outputs[0]

    def const(values, dtype, name):
        return new_initializer(graph, np.array(values, dtype), f"cpu_image_{name}")

    image = node.inputs[0]  # uint32 [height, width], R in the low byte
    bytes_ = op("BitwiseAnd", [op("BitShift", [op("Unsqueeze", [image, const([2], np.int64, "axis2")]),
                                               const([8 * c for c in channels], np.uint32, "shifts")],
                                  direction="RIGHT"), const([255], np.uint32, "byte")])
    planes = op("Unsqueeze", [op("Transpose", [op("Cast", [bytes_], to=ir.DataType.FLOAT.value)], perm=[2, 0, 1]),
                              const([0], np.int64, "axis0")])  # [1, C, H, W], 0..255
    hw = op("Slice", [op("Shape", [image]), const([0], np.int64, "zero"), const([2], np.int64, "two")])
    size, shorter = _attr(node, "size"), _attr(node, "shorter", 0)
    if size is not None:
        resized = const(list(size), np.int64, "size")
    elif shorter:  # the shorter side to `shorter`, the other rounded half up: (2 d n + s) // (2 s)
        short = op("ReduceMin", [hw], keepdims=1)
        resized = op("Div", [op("Add", [op("Mul", [hw, const([2 * shorter], np.int64, "twice_n")]), short]),
                             op("Mul", [short, const([2], np.int64, "twice")])])
    else:
        resized = None
    x = planes
    if resized is not None:
        sizes = op("Concat", [const([1, len(channels)], np.int64, "nc"), resized], axis=0)
        mode = _attr(node, "mode", "linear")
        antialias = int(_attr(node, "antialias", 0))
        # (onnxruntime refuses exclude_outside where it means nothing: nearest, linear without antialias)
        exclude = int(_attr(node, "exclude_outside", 0)) if mode == "cubic" or antialias else 0
        attrs = {"mode": mode, "antialias": antialias, "exclude_outside": exclude,
                 "cubic_coeff_a": float(_attr(node, "cubic_coeff_a", -0.75))}
        if mode == "nearest":
            attrs["nearest_mode"] = _attr(node, "nearest_mode", "round_prefer_ceil")
        x = op("Resize", [planes, None, None, sizes], **attrs)  # (roi and scales left out: sizes decides)
    crop = _attr(node, "crop")
    if crop is not None:
        have = resized if resized is not None else hw
        starts = op("Div", [op("Sub", [have, const(list(crop), np.int64, "crop")]), const([2], np.int64, "half")])
        ends = op("Add", [starts, const(list(crop), np.int64, "crop_end")])
        x = op("Slice", [x, starts, ends, const([2, 3], np.int64, "hw_axes")])
    return made, x
