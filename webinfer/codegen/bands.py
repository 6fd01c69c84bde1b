"""An input larger than one storage binding, read as bands: the same buffer bound several times, each binding a
range of at most ``max_binding_bytes`` starting at a band's first element (manifest ``offset``), and one
``ld_<name>(i)`` in the shader that picks the band of element ``i``. A 48-megapixel photo packed 4 bytes per
pixel is 192 MB: two bands under WebGPU's 128 MiB binding, in one buffer under its maxBufferSize.

The band boundaries are fixed flat indices (multiples of the band size), so one shader serves every input
size; a band past the input's end binds 4 bytes at offset 0 and is never read. Inputs larger than all the
bands together are refused per run by a guard."""

from __future__ import annotations

from .. import dims as D
from .kernels.helpers import compute_type

OFFSET_ALIGN = 64  # elements: 256-byte binding offsets (WebGPU's minStorageBufferOffsetAlignment)


def banded_read(ctx, name: str, t, bands: int) -> tuple[dict, dict]:
    """``t`` (a 32-bit tensor) as reads for a kernel: ``{name: t}`` when it fits one binding, else ``bands`` views
    ``{name_b0: ..., name_b1: ...}``; and the template's ``bands`` entry that defines ``ld_<name>``."""
    per = ctx.limits["max_binding_bytes"] // 4
    per -= per % OFFSET_ALIGN
    n = t.numel
    if isinstance(n, int) and n <= per:
        return {name: ctx.gpu(t)}, {}
    src = ctx.gpu(t)
    ctx.assume(D.add(bands * per, D.mul(n, -1)),
               f"{D.to_text(n)} elements in {bands} bindings of {per} elements at most (the device's binding limit)")
    reads, names = {}, []
    for k in range(bands):
        lo, hi = k * per, (k + 1) * per
        rows = D.add(D.dmin(n, hi), D.mul(D.dmin(n, lo), -1))
        offset = 0 if k == 0 else D.mul(lo, D.dmin(1, D.floordiv(n, lo + 1)))  # 0 for a band past the end
        view = ctx._l.program.new_tensor(src.dtype, (rows,), alias=src, offset=offset)
        names.append(f"{name}_b{k}")
        reads[names[-1]] = view
    return reads, {name: {"vars": names, "per": per, "type": compute_type(t.dtype)}}
