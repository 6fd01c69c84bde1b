"""Helpers shared by the kernel families: broadcasting, strides, axes, and a generated fill (``generate``)."""

from __future__ import annotations

from ... import dims as D
from ...dims import Dim
from ...dtypes import dtype as get_dtype
from ...errors import WebinferError


def compute_type(dtype: str) -> str:
    return get_dtype(dtype).compute


def broadcast_shapes(shapes) -> tuple[Dim, ...]:
    """Numpy broadcasting over possibly symbolic dims (a symbolic dim is assumed to match a fixed one)."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(rank):
        dims = [s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0]
        non_one = [d for d in dims if d != 1]
        if not non_one:
            out.append(1)
            continue
        fixed = {d for d in non_one if isinstance(d, int)}
        if len(fixed) > 1:
            raise WebinferError(f"shapes {[list(s) for s in shapes]} do not broadcast")
        out.append(fixed.pop() if fixed else non_one[0])
    return tuple(out)


def contiguous_strides(shape) -> list[Dim]:
    strides: list[Dim] = []
    acc: Dim = 1
    for d in reversed(shape):
        strides.append(acc)
        acc = D.mul(acc, d)
    return strides[::-1]


def broadcast_strides(shape, out_shape) -> list[Dim]:
    """Strides of ``shape`` read as ``out_shape`` (0 on broadcast axes, missing leading axes)."""
    pad = len(out_shape) - len(shape)
    own = contiguous_strides(shape)
    out: list[Dim] = []
    for axis in range(len(out_shape)):
        i = axis - pad
        if i < 0 or (shape[i] == 1 and out_shape[axis] != 1):
            out.append(0)
        else:
            out.append(own[i] if shape[i] != 1 else 0)
    return out


def broadcast_layout(shapes: list, out_shape) -> tuple[list, list[list]]:
    """The broadcasting index space of an elementwise kernel, coalesced: (dims, per-input strides) with size-1
    dims dropped and adjacent dims merged where every input walks them as one (a stride equal to the inner
    stride times the inner dim; zeros merge with zeros). Fewer dims mean fewer divisions per element and fewer
    distinct shaders ([1, 1, s, 1] + [1] and [s] + [1] index alike)."""
    strides = [broadcast_strides(s, out_shape) for s in shapes]
    keep = [d for d, dim in enumerate(out_shape) if dim != 1]
    dims = [out_shape[d] for d in keep]
    strides = [[st[d] for d in keep] for st in strides]
    d = len(dims) - 2
    while d >= 0:
        if all(st[d] == D.mul(st[d + 1], dims[d + 1]) for st in strides):
            dims[d:d + 2] = [D.mul(dims[d], dims[d + 1])]
            for st in strides:
                st[d:d + 2] = [st[d + 1]]
        d -= 1
    return dims, strides


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    a = int(axis)
    if a < -max(rank, 1) or a >= max(rank, 1):
        raise WebinferError(f"{what} {axis} is out of range for rank {rank}")
    return a + rank if a < 0 else a


def generate(ctx, out, expr: str, values: dict | None = None, matrix: bool = False, reads=None) -> None:
    """Fill ``out`` with ``expr`` (over gi, row, col and ``values`` params) on the GPU."""
    params = {"n": out.numel, **(values or {})}
    if matrix:
        params.update(rows=out.shape[-2], cols=out.shape[-1])
    ctx.dispatch("generate.wgsl.j2", reads or {}, {"out": out}, work=out.numel, params=params,
                 values=list(values or {}), matrix=matrix, expr=expr)
