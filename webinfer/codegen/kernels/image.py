"""Pre-processing: an RGBA8 image of any size, packed 4 bytes per u32 (the bytes a canvas or PIL gives, R in
the low byte), resized and centre-cropped on the GPU into a float [1, C, h, w] tensor of 0..255 values.

``webinfer.ImageResize`` is written by ``graph/prepost.py`` (the ``--preprocess`` prologue); normalisation and
layout follow as ordinary ONNX nodes, and the epilogue pass folds the normalisation into the resize kernel's
store. One resize kernel reads the packed pixels directly (a 12-megapixel photo is 48 MB packed, 144 MB as
float planes, beyond a WebGPU binding), computing only the cropped window; a bigger photo (48 megapixels: 192 MB
packed) is read in bands, several bindings of one buffer (codegen/bands.py).
"""

from __future__ import annotations

from ... import dims as D
from ..registry import WEBINFER_DOMAIN, lowering
from .resize import Interpolation, ResizedAxis, emit_resize


def resized_size(ih, iw, size: list[int] | None, shorter: int) -> tuple:
    """(height, width) after resizing: ``size`` as given, or the shorter side to ``shorter`` with the other
    side rounded (half up) to keep the aspect ratio, or the image's own size."""
    if shorter:
        short = D.dmin(ih, iw)
        return tuple(D.floordiv(D.add(D.mul(D.mul(d, shorter), 2), short), D.mul(short, 2)) for d in (ih, iw))
    if size:
        return int(size[0]), int(size[1])
    return ih, iw


def letterbox_geometry(ih, iw, size: list[int], align: str) -> tuple:
    """Where a letterboxed image lands in [H, W]: (resized height, width, top, left). The scale is
    min(H / ih, W / iw); the limiting side fills its axis, the other is rounded half up, and
    ``min(H, round(ih * W / iw))`` picks whichever holds without comparing at build time."""
    H, W = int(size[0]), int(size[1])
    rh = D.dmin(H, D.floordiv(D.add(D.mul(D.mul(ih, W), 2), iw), D.mul(iw, 2)))
    rw = D.dmin(W, D.floordiv(D.add(D.mul(D.mul(iw, H), 2), ih), D.mul(ih, 2)))
    if align == "top-left":
        return rh, rw, 0, 0
    return rh, rw, D.floordiv(D.add(H, D.mul(rh, -1)), 2), D.floordiv(D.add(W, D.mul(rw, -1)), 2)


def image_plan(ctx) -> tuple[list[ResizedAxis], Interpolation, dict, list]:
    """ImageResize's resized axes, interpolation, the resize kernel's view of the packed image and the output
    shape [1, channels, h, w]. Attributes: ``channels`` (the byte of each output channel: [0, 1, 2] RGB, [2, 1, 0] BGR), ``size``
    [h, w] or ``shorter`` (resize), ``crop`` [h, w] (centre crop of the resized image), ``mode``,
    ``antialias``, ``exclude_outside``, ``cubic_coeff_a``, ``nearest_mode`` (Resize's meanings)."""
    image = ctx.inputs[0]
    if image.dtype != "uint32" or image.rank != 2:
        raise ctx.unsupported("the image must be uint32 [height, width] (RGBA8 pixels)")
    ih, iw = image.shape
    channels = [int(c) for c in ctx.attr("channels", [0, 1, 2])]
    if not channels or any(c not in range(4) for c in channels):
        raise ctx.unsupported("channels must name bytes 0..3 of a pixel")
    how = Interpolation(mode=ctx.attr("mode", "linear"), nearest=ctx.attr("nearest_mode", "round_prefer_ceil"),
                        antialias=bool(ctx.attr("antialias", 1)), exclude_outside=bool(ctx.attr("exclude_outside", 1)),
                        cubic_a=float(ctx.attr("cubic_coeff_a", -0.5)), extrapolation=float(ctx.attr("pad_value", 0.0)))
    how.check(ctx)
    if ctx.attr("letterbox"):
        box = [int(v) for v in ctx.attr("letterbox")]
        rh, rw, top, left = letterbox_geometry(ih, iw, box, ctx.attr("align", "center"))
        view = {"shape": [1, len(channels), ih, iw], "strides": [0, 0, iw, 1], "channels": channels,
                "offsets": [top, left], "letterbox": True}
        return [ResizedAxis(2, "sizes", rh), ResizedAxis(3, "sizes", rw)], how, view, [1, len(channels), *box]
    rh, rw = resized_size(ih, iw, ctx.attr("size"), int(ctx.attr("shorter", 0)))  # (shorter >= crop: prepost.py)
    ch, cw, offsets = rh, rw, [0, 0]
    shorter = int(ctx.attr("shorter", 0))
    if ctx.attr("crop"):
        (ch, cw), offsets = (int(v) for v in ctx.attr("crop")), []
        for resized, crop, name in ((rh, ch, "height"), (rw, cw, "width")):
            if shorter < crop:  # (resizing the short side to at least the crop always leaves room)
                ctx.assume(D.add(resized, -crop), f"the resized image's {name} {D.to_text(resized)} must be at "
                                                  f"least the crop's {crop}")
            offsets.append(D.floordiv(D.add(resized, -crop), 2))
    axes = [ResizedAxis(2, "sizes", rh), ResizedAxis(3, "sizes", rw)]
    view = {"shape": [1, len(channels), ih, iw], "strides": [0, 0, iw, 1], "channels": channels, "offsets": offsets}
    return axes, how, view, [1, len(channels), ch, cw]


@lowering("ImageResize", domain=WEBINFER_DOMAIN)
def lower_image_resize(ctx, **epilogue) -> None:
    """``epilogue``: the normalisation after it, fused where the kernel stores (kernels/fused.py)."""
    axes, how, view, shape = image_plan(ctx)
    emit_resize(ctx, ctx.inputs[0], ctx.output(0, "float32", shape), axes, how, **view, **epilogue, banded=True)
