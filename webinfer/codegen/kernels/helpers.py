"""Shape helpers shared by the kernel families: broadcasting, strides, axes."""

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


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    a = int(axis)
    if a < -max(rank, 1) or a >= max(rank, 1):
        raise WebinferError(f"{what} {axis} is out of range for rank {rank}")
    return a + rank if a < 0 else a
