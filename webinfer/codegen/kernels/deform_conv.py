"""DeformConv (2-D): a direct convolution whose every kernel tap samples the input bilinearly (zero outside)
at its regular position plus a learned offset, scaled by an optional mask; one invocation per output."""

from __future__ import annotations

from ..registry import lowering


@lowering("DeformConv")
def lower_deform_conv(ctx) -> None:
    x, w, offset = ctx.inputs[:3]
    if x.rank != 4 or w.rank != 4:
        raise ctx.unsupported("only 2-D deformable convolution (X [N, C, H, W])")
    kh, kw = ctx.attr("kernel_shape") or list(w.shape[2:])
    group, og = ctx.attr("group", 1), ctx.attr("offset_group", 1)
    pads = ctx.attr("pads") or [0, 0, 0, 0]
    sh, sw = ctx.attr("strides") or [1, 1]
    dh, dw = ctx.attr("dilations") or [1, 1]
    oc, icg = w.shape[0], w.shape[1]
    out = ctx.output(0, x.dtype, (x.shape[0], oc, offset.shape[2], offset.shape[3]))
    if out.numel == 0:
        return
    reads = {"x": ctx.gpu(x), "w": ctx.gpu(w), "off": ctx.gpu(offset)}
    if ctx.has_input(3):
        reads["bias"] = ctx.gpu(ctx.inputs[3])
    if ctx.has_input(4):
        reads["mask"] = ctx.gpu(ctx.inputs[4])
    params = {"n": out.numel, "OC": oc, "OH": offset.shape[2], "OW": offset.shape[3], "C": x.shape[1], "H": x.shape[2],
              "W": x.shape[3], "ICG": icg, "OCG": oc // group, "ICOG": x.shape[1] // og, "OG": og, "KH": kh, "KW": kw,
              "sh": ("i32", sh), "sw": ("i32", sw), "dh": ("i32", dh), "dw": ("i32", dw),
              "ph": ("i32", pads[0]), "pw": ("i32", pads[1])}
    ctx.dispatch("deform_conv.wgsl.j2", reads, {"out": out}, work=out.numel, params=params,
                 has_bias=ctx.has_input(3), has_mask=ctx.has_input(4))
