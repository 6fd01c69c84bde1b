"""Sampling at coordinates computed from data: GridSample (``grid_sample.wgsl.j2``) and AffineGrid.

GridSample: one invocation per output element reads its normalized coordinates from the grid, maps them to
input pixels (align_corners, then rounding for nearest, then border/reflection when outside) and sums the
neighbours (1, 2 or 4 per spatial axis) weighted per axis, each neighbour index padded (zeros, border,
reflection) like ONNX's reference (which follows PyTorch's GridSampler).
"""

from __future__ import annotations

from ... import dims as D
from ..registry import lowering
from .helpers import contiguous_strides
from .reduce import literal

_MODES = {"bilinear": "linear", "bicubic": "cubic", "linear": "linear", "cubic": "cubic", "nearest": "nearest"}
_TAPS = {"nearest": 1, "linear": 2, "cubic": 4}


@lowering("GridSample")
def lower_grid_sample(ctx) -> None:
    x, grid = ctx.inputs[0], ctx.inputs[1]
    mode = _MODES.get(ctx.attr("mode", "linear" if ctx.opset >= 20 else "bilinear"))
    padding = ctx.attr("padding_mode", "zeros")
    if mode is None or padding not in ("zeros", "border", "reflection"):
        raise ctx.unsupported(f"mode {ctx.attr('mode')!r} / padding_mode {padding!r}")
    r = grid.shape[-1]
    if not isinstance(r, int) or r != x.rank - 2 or r < 1:
        raise ctx.unsupported(f"a grid of {r} coordinates for {x.rank - 2} spatial dims")
    spatial_in, spatial_out = x.shape[2:], grid.shape[1:-1]
    out = ctx.output(0, x.dtype, (x.shape[0], x.shape[1], *spatial_out))
    if out.numel == 0:
        return
    params: dict = {"n": out.numel, "C": x.shape[1], "S_out": D.product(spatial_out), "S_in": D.product(spatial_in)}
    for d, (size, stride) in enumerate(zip(spatial_in, contiguous_strides(spatial_in))):
        params[f"L{d}"], params[f"st{d}"] = size, stride
    ctx.dispatch("grid_sample.wgsl.j2", {"x": ctx.gpu(x), "grid": ctx.gpu(grid)}, {"out": out}, work=out.numel,
                 params=params, rank=r, mode=mode, taps=_TAPS[mode], padding=padding,
                 align=bool(ctx.attr("align_corners", 0)))


@lowering("AffineGrid")
def lower_affine_grid(ctx) -> None:
    """grid[n, s..., k] = theta[n, k, :] . (x, y[, z], 1): the base grid of ``size``'s spatial dims in [-1, 1]
    (cell centres, or corners with align_corners), x along the innermost axis."""
    theta = ctx.inputs[0]
    size = ctx.host_ints(1)
    if size is None or len(size) not in (4, 5):
        raise ctx.unsupported("size must be known at build time: [N, C, H, W] or [N, C, D, H, W]")
    spatial = size[2:]
    r = len(spatial)
    if theta.shape[1:] != (r, r + 1):
        raise ctx.unsupported(f"theta of shape {list(theta.shape)} for {r} spatial dims")
    out = ctx.output(0, theta.dtype, (size[0], *spatial, r))
    if out.numel == 0:
        return
    params: dict = {"n": out.numel, "S": D.product(spatial)}
    for d, (size_d, stride) in enumerate(zip(spatial, contiguous_strides(spatial))):
        params[f"L{d}"], params[f"st{d}"] = size_d, stride
    ctx.dispatch("affine_grid.wgsl.j2", {"theta": ctx.gpu(theta)}, {"out": out}, work=out.numel, params=params,
                 rank=r, align=bool(ctx.attr("align_corners", 0)))


@lowering("RoiAlign")
def lower_roi_align(ctx) -> None:
    """out[r, c, ph, pw]: the average (or max) of bilinear samples on a grid inside bin (ph, pw) of roi r, the
    grid sampling_ratio per side or ceil(roi size / bins) when 0 (a count computed per roi from its data)."""
    x, rois, batch = ctx.inputs[:3]
    if x.rank != 4:
        raise ctx.unsupported("X must be [N, C, H, W]")
    mode = ctx.attr("mode", "avg")
    ctm = ctx.attr("coordinate_transformation_mode", "half_pixel" if ctx.opset >= 16 else "output_half_pixel")
    mode, ctm = (v.decode() if isinstance(v, bytes) else v for v in (mode, ctm))
    if mode not in ("avg", "max") or ctm not in ("half_pixel", "output_half_pixel"):
        raise ctx.unsupported(f"mode {mode!r} / coordinate_transformation_mode {ctm!r}")
    oh, ow = ctx.attr("output_height", 1), ctx.attr("output_width", 1)
    out = ctx.output(0, x.dtype, (rois.shape[0], x.shape[1], oh, ow))
    if out.numel == 0:
        return
    params = {"n": out.numel, "C": x.shape[1], "H": x.shape[2], "W": x.shape[3], "OH": oh, "OW": ow,
              "ratio": ctx.attr("sampling_ratio", 0)}
    reads = {"x": ctx.gpu(x), "rois": ctx.gpu(rois), "bi": ctx.gpu(batch)}
    ctx.dispatch("roi_align.wgsl.j2", reads, {"out": out}, work=out.numel, params=params, avg=mode == "avg",
                 half_pixel=ctm == "half_pixel", scale=literal(ctx.attr("spatial_scale", 1.0)),
                 roi_cols=rois.shape[1])
