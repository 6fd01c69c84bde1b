"""The mask epilogue, ``webinfer.ImageMask`` (written by graph/vision_epilogues.py): a segmentation or matting
model's mask -> the original image's size, on the GPU (mask.wgsl.j2: one invocation per pixel).

Inputs: the mask ([1, C, h, w] per-class logits, or [1, 1, h, w] / [1, h, w] a matte) covering the model input,
and the packed RGBA8 image the prologue resized into it. ``argmax``: int32 [height, width] class map;
``matte``: float32 [height, width] matte and uint32 [height, width] cut-out (the pixels with the matte as
alpha). The mask is sampled bilinearly at each image pixel's centre through the same letterbox geometry as the
prologue's (kernels/image.py), clamped to the picture's part of the mask.
"""

from __future__ import annotations

from ... import dims as D
from ..registry import WEBINFER_DOMAIN, lowering
from .image import letterbox_geometry


@lowering("ImageMask", domain=WEBINFER_DOMAIN)
def lower_image_mask(ctx) -> None:
    mask, image = ctx.inputs[0], ctx.inputs[1]
    if mask.rank not in (3, 4) or mask.shape[0] != 1:
        raise ctx.unsupported(f"the mask must be [1, classes, height, width] or [1, height, width], got "
                              f"{[D.to_text(d) for d in mask.shape]}")
    classes, mh, mw = (1, *mask.shape[1:]) if mask.rank == 3 else mask.shape[1:]
    mode = ctx.attr("mode", "argmax")
    if mode == "matte" and classes != 1:
        raise ctx.unsupported(f"a matte has one channel, this mask has {D.to_text(classes)}")
    want = ctx.attr("classes")
    if want is not None and (not isinstance(classes, int) or int(want) != classes):
        raise ctx.unsupported(f"the labels name {int(want)} classes, the mask has {D.to_text(classes)}")
    ih, iw = image.shape
    size = [int(v) for v in ctx.attr("input_size")]
    if ctx.attr("fit") == "letterbox":
        rh, rw, top, left = letterbox_geometry(ih, iw, size, ctx.attr("align", "center"))
    else:
        rh, rw, top, left = size[0], size[1], 0, 0
    n = D.mul(ih, iw)
    params = {"n": n, "iw": iw, "ih": ih, "rw": rw, "rh": rh, "left": left, "top": top, "W": size[1], "H": size[0],
              "mw": mw, "mh": mh, "C": classes}
    reads = {"mask": ctx.gpu(mask)}
    if mode == "argmax":
        writes = {"seg": ctx.output(0, "int32", (ih, iw))}
    else:
        reads["image"] = ctx.gpu(image)
        writes = {"matte": ctx.output(0, "float32", (ih, iw)), "cutout": ctx.output(1, "uint32", (ih, iw))}
    ctx.dispatch("mask.wgsl.j2", reads, writes, work=n, params=params, mode=mode, sigmoid=bool(ctx.attr("sigmoid", 0)))
