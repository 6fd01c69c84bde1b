"""Ops that put values back into an image: MaxUnpool (a scatter by MaxPool's indices) and Col2Im (the
adjoint of im2col: each pixel sums the column entries of every block that covers it, a gather)."""

from __future__ import annotations

from ... import dims as D
from ..registry import lowering
from .helpers import compute_type, contiguous_strides, generate


def _ints(ctx, i: int, what: str) -> list[int]:
    v = ctx.host_ints(i)
    if v is None or not D.is_static(v):
        raise ctx.unsupported(f"{what} must be known at build time")
    return [int(d) for d in v]


@lowering("MaxUnpool")
def lower_max_unpool(ctx) -> None:
    """Zeros, then x[e] written at index[e] of the inferred shape, placed at the same coordinates of the output
    shape (which may be larger: MaxUnpool's output_shape)."""
    x, idx = ctx.inputs[0], ctx.inputs[1]
    kernel = ctx.attr("kernel_shape")
    r = len(kernel)
    strides = ctx.attr("strides") or [1] * r
    pads = ctx.attr("pads") or [0] * (2 * r)
    inferred = [x.shape[0], x.shape[1]] + [D.add(D.mul(D.add(x.shape[2 + d], -1), strides[d]),
                                                 kernel[d] - pads[d] - pads[r + d]) for d in range(r)]
    shape = _ints(ctx, 2, "output_shape") if ctx.has_input(2) else inferred
    if len(shape) != x.rank:
        raise ctx.unsupported(f"output_shape {shape} for a rank-{x.rank} input")
    out = ctx.output(0, x.dtype, shape)
    if out.numel == 0:
        return
    generate(ctx, out, f"{compute_type(out.dtype)}(0)")
    if x.numel == 0:
        return
    params: dict = {"n": x.numel}
    for d, (size, stride) in enumerate(zip(inferred, contiguous_strides(shape))):
        params[f"d{d}"], params[f"s{d}"] = size, stride
    ctx.dispatch("unpool.wgsl.j2", {"x": ctx.gpu(x), "idx": ctx.gpu(idx)}, {"out": out}, work=x.numel,
                 params=params, kind="maxunpool", rank=x.rank)


@lowering("Col2Im")
def lower_col2im(ctx) -> None:
    x = ctx.inputs[0]
    image, block = _ints(ctx, 1, "image_shape"), _ints(ctx, 2, "block_shape")
    r = len(image)
    if len(block) != r or x.rank != 3:
        raise ctx.unsupported("input [N, C * prod(block), L] with image_shape and block_shape of one length")
    dil = ctx.attr("dilations") or [1] * r
    pads = ctx.attr("pads") or [0] * (2 * r)
    strides = ctx.attr("strides") or [1] * r
    k = D.product(block)
    blocks = [(image[d] + pads[d] + pads[r + d] - dil[d] * (block[d] - 1) - 1) // strides[d] + 1 for d in range(r)]
    channels = D.floordiv(x.shape[1], k)
    out = ctx.output(0, x.dtype, (x.shape[0], channels, *image))
    if out.numel == 0:
        return
    params: dict = {"n": out.numel, "K": k, "L": D.product(blocks), "S": D.product(image)}
    for d in range(r):
        params.update({f"img{d}": image[d], f"blk{d}": block[d], f"nb{d}": blocks[d], f"pad{d}": ("i32", pads[d]),
                       f"dil{d}": ("i32", dil[d]), f"st{d}": ("i32", strides[d])})
    ctx.dispatch("unpool.wgsl.j2", {"x": ctx.gpu(x)}, {"out": out}, work=out.numel, params=params, kind="col2im",
                 rank=r)
