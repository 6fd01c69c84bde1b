"""Weights bound as 2-D textures (a kernel class's ``weight_textures``): the layout the build, both runtimes
and the page's loader (webinfer/site/weights.mjs ``textureSize``) agree on. Standard library only.

A tensor's bytes fill texels row by row. The width is a power of two, so a shader finds texel i at
(i & (w - 1), i >> log2 w) from ``textureDimensions`` and nothing of the layout is compiled into it. Rows are
at least MIN_WIDTH texels (a shorter tensor: its texel count rounded up to a power of two), so padding stays
under one row; at most MAX_SIDE rows and columns (WebGPU's default maxTextureDimension2D, which every
adapter offers).
"""

from __future__ import annotations

# format -> (bytes per texel, the WGSL texel type's scalar, the bind group layout's sampleType)
FORMATS = {"rgba32uint": (16, "u32", "uint"), "rg32float": (8, "f32", "unfilterable-float"),
           "r32float": (4, "f32", "unfilterable-float")}
MAX_SIDE = 8192
MIN_WIDTH = 256


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def texture_size(nbytes: int, fmt: str) -> tuple[int, int] | None:
    """(width, height) in texels of a weight of ``nbytes`` as a ``fmt`` texture; None when it cannot be one."""
    texel = FORMATS[fmt][0]
    texels = max(1, -(-nbytes // texel))
    width = max(_pow2_at_least(min(texels, MIN_WIDTH)), _pow2_at_least(-(-texels // MAX_SIDE)))
    height = -(-texels // width)
    if width > MAX_SIDE or height > MAX_SIDE:
        return None
    return width, height


def texture_bytes(data: bytes, nbytes: int, fmt: str) -> tuple[bytes, tuple[int, int], int]:
    """A weight's bytes padded to whole rows: (bytes, (width, height), bytes per row)."""
    width, height = texture_size(nbytes, fmt)
    row = width * FORMATS[fmt][0]
    return bytes(data) + b"\0" * (row * height - len(data)), (width, height), row
