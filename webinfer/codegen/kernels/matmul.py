"""MatMul, Gemm and the integer/quantized matmuls: one strided, register-blocked matmul kernel.

Every variant is ``out[b, m, n] = epilogue(sum_k A(b, m, k) * B(b, k, n))`` where A and B are read through
strides (so transposes and batch broadcasting cost nothing) and the epilogue adds Gemm's ``alpha``/``beta*C``
or the quantized rescale. How the output is tiled is a :class:`~webinfer.options.Tiling` of the kernel class
being lowered (``ctx.kclass``): software GPUs (lavapipe, SwiftShader) are fastest with many outputs per
invocation and no workgroup memory; real GPUs prefer workgroup-shared tiles (``shared=True``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import dims as D
from ...errors import WebinferError
from ..emit import wgsl_literal
from ..registry import lowering
from .elementwise import HELPERS, elementwise
from .helpers import broadcast_shapes, broadcast_strides, compute_type
from .loop_limit import check_loop
from .quant_matmul import gemv_kn
from .reduce import LOOP_BUDGET, row_kernel, sum_stat
from .tiles import choose_tiling, row_steps, tiled_matmul


@dataclass
class Operand:
    """A matrix operand read through strides: element (b, r, c) at ``off(b) + r*sr + c*sc``."""

    tensor: object
    sr: D.Dim
    sc: D.Dim
    batch_shape: tuple = ()
    batch_stride: D.Dim = 0  # elements per matrix


def matmul(ctx, a: Operand, b: Operand, out, m, n, k, *, alpha=1.0, c=None, beta=0.0, epilogue=None,
           zero_points=(None, None), acc_type: str | None = None, epilogue_fn: str = "",
           extra_reads: dict | None = None, when: tuple | None = None) -> None:
    """Emit ``out[batch, m, n] = alpha * A @ B (+ beta * C)``; ``out`` is contiguous [batch..., m, n].

    ``c``: (tensor, stride_m, stride_n) broadcast over the output, or None. ``epilogue``: a WGSL expression
    over ``acc``, ``row``, ``col`` replacing the alpha/beta epilogue. ``zero_points``: for A and B, None or
    (tensor, period) subtracted on load: per row of A / column of B (index modulo ``period``), or one value
    when ``period`` is None. ``epilogue_fn``/``extra_reads``: WGSL functions the epilogue calls (over
    ``acc``, ``row``, ``col`` and ``idx``, the output's linear index) and the tensors they read (fused.py).
    """
    out_batch = broadcast_shapes([a.batch_shape, b.batch_shape])
    nb = D.product(out_batch)
    params: dict = {"M": m, "N": n, "K": k, "MN": D.mul(m, n), "sam": a.sr, "sak": a.sc, "sbk": b.sr, "sbn": b.sc}
    brank = len(out_batch)
    for d, dim in enumerate(out_batch):
        params[f"bd{d}"] = dim
    for name, op in (("sa", a), ("sb", b)):
        for d, s in enumerate(broadcast_strides(op.batch_shape, out_batch)):
            params[f"{name}{d}"] = D.mul(s, op.batch_stride)
    reads = {"a": ctx.gpu(a.tensor), "b": ctx.gpu(b.tensor)}
    ct = acc_type or compute_type(out.dtype)
    if c is not None:
        reads["c"] = ctx.gpu(c[0])
        params.update({"scm": c[1], "scn": c[2]})
    reads.update({name: ctx.gpu(t) for name, t in (extra_reads or {}).items()})
    zero = {}
    for name, zp in zip("ab", zero_points):
        if zp is not None:
            reads[name + "z"] = ctx.gpu(zp[0])
            zero[name] = "line" if zp[1] is not None else "scalar"
            if zp[1] is not None:
                params[name + "z_mod"] = zp[1]
    if epilogue is None:
        epilogue = _gemm_epilogue(ct, alpha, beta if c is not None else 0.0, c is not None)
    if epilogue_fn:
        epilogue = f"epi({epilogue}, row, col, idx)"
    t = choose_tiling(m, n, _vec4_ok(a, b, k, n, zero_points, ct), ctx.kclass, k)
    if t.shared:
        a_vec = _rows_vec4(a, k, ct, zero_points[0])
        b_vec = _rows_vec4(b, n, ct, zero_points[1])
        tiled_matmul(ctx, reads, out, t, (m, n, nb), params, when=when, brank=brank, ct=ct, epilogue=epilogue,
                     epilogue_fn=epilogue_fn, has_c=c is not None, zero=zero, a_src="vec" if a_vec else "strided",
                     b_src="vec" if b_vec else "strided", vec4_vars=(["a"] if a_vec else []) + (["b"] if b_vec else []))
        return
    grid = (D.ceildiv(n, t.tn * t.wx), D.ceildiv(m, t.tm * t.wy), nb)
    vec = t.vec
    check_loop(ctx, k // 4 if vec and isinstance(k, int) else k, "the inner dimension K")
    if isinstance(nb, int) and nb > 65535:
        raise ctx.unsupported(f"{nb} matrices in one batch (limit 65535)")
    params["wx"] = t.wx  # (a uniform: products of other aspects share the pipeline)
    # loads shared by a subgroup's 2 x 4 tiles (matmul.wgsl.j2 `sg`): a workgroup 4 invocations wide
    sg = ctx.kclass.subgroup_lanes
    sg = sg if sg == 8 and t.wx == 4 and t.tm % 4 == 0 and t.tn % 2 == 0 and (t.wx * t.wy) % 8 == 0 else 0
    ctx.dispatch("matmul.wgsl.j2", reads, {"out": out}, grid=grid, wg=t.wx * t.wy, params=params, t=t, when=when,
                 brank=brank, ct=ct, ta=compute_type(a.tensor.dtype), tb=compute_type(b.tensor.dtype),
                 epilogue=epilogue, epilogue_fn=epilogue_fn, has_c=c is not None, zero=zero, vec=vec, sg=sg,
                 vec4_vars=["a", "b"] + (["out"] if out.dtype == "float32" else []) if vec else [])


def _vec4_ok(a: Operand, b: Operand, k, n, zero_points, ct: str) -> bool:
    """vec4 loads need f32 row-major operands whose rows start on 16-byte boundaries."""
    return (ct == "f32" and a.tensor.dtype == "float32" and b.tensor.dtype == "float32"
            and zero_points == (None, None) and a.sc == 1 and b.sc == 1 and a.sr == k
            and b.sr == n and _divides(4, k) and _divides(4, n))


def _rows_vec4(op: Operand, cols, ct: str, zero_point) -> bool:
    """Whether an operand's rows can be read as vec4: f32, contiguous rows whose length is a multiple of 4."""
    return (ct == "f32" and op.tensor.dtype == "float32" and zero_point is None and op.sc == 1 and op.sr == cols
            and _divides(4, cols) and cols >= 4)


def _divides(tile: int, size) -> bool:
    """Whether ``size`` is statically a multiple of the tile (no edge clamping needed)."""
    return isinstance(size, int) and size % tile == 0


def _gemm_epilogue(ct: str, alpha: float, beta: float, has_c: bool) -> str:
    expr = "acc" if alpha == 1.0 else f"{wgsl_literal(alpha, ct)} * acc"
    if has_c and beta != 0.0:
        cv = "cval(row, col)"
        expr += f" + {cv}" if beta == 1.0 else f" + {wgsl_literal(beta, ct)} * {cv}"
    return expr


def matrix_shape(shape):
    """Split a matmul operand's shape into (batch dims, rows, cols)."""
    return tuple(shape[:-2]), shape[-2], shape[-1]


@lowering("MatMul")
def lower_matmul(ctx, **epilogue) -> None:
    a, b = ctx.inputs[0], ctx.inputs[1]
    out = ctx.output(0, a.dtype, matmul_shape(ctx, a, b))
    if b.value is not None and b.rank == 2 and a.rank >= 2 and a.dtype == b.dtype == "float32" \
            and not (_split_k(b.shape[0]) and not epilogue):
        gemv_when, gemm_when = row_steps(D.product(a.shape[:-1]), ctx)
        if gemv_when != "skip":
            gemv_kn(ctx, a, b, out, gemv_when, **epilogue)
        if gemm_when != "skip":
            matmul_into(ctx, a, b, out, when=gemm_when, **epilogue)
        return
    matmul_into(ctx, a, b, out, **epilogue)


def matmul_shape(ctx, a, b) -> tuple:
    """numpy.matmul's output shape: 1-D operands gain (and lose) a unit dim; batch dims broadcast."""
    if a.rank == 0 or b.rank == 0:
        raise ctx.unsupported("matmul of a scalar")
    ka, kb = a.shape[-1], b.shape[-2] if b.rank > 1 else b.shape[0]
    if isinstance(ka, int) and isinstance(kb, int) and ka != kb:
        raise WebinferError(f"{ctx.op} {ctx.describe()}: inner dims {ka} and {kb} differ")
    batch = broadcast_shapes([a.shape[:-2], b.shape[:-2]])
    return tuple(batch) + ((a.shape[-2],) if a.rank > 1 else ()) + ((b.shape[-1],) if b.rank > 1 else ())


def matmul_into(ctx, a, b, out, **kw) -> None:
    """``out = a @ b`` with numpy.matmul semantics (see :func:`matmul_shape`)."""
    a_shape = (1,) + tuple(a.shape) if a.rank == 1 else tuple(a.shape)
    b_shape = tuple(b.shape) + (1,) if b.rank == 1 else tuple(b.shape)
    ab, m, k = matrix_shape(a_shape)
    bb, _, n = matrix_shape(b_shape)
    if D.product(bb) == 1 and (ab or _split_k(k) and not kw):
        # B is one matrix: fold A's batch into its rows (one big product, better tiles).
        m_all = D.mul(D.product(ab), m)
        s = _split_k(k) if not kw else None
        if s:
            # K past lavapipe's loop limit: S products over K / S each (a batch), then their sum
            kc = k // s
            part = ctx.temp(out.dtype, (s, m_all, n))
            matmul(ctx, Operand(a, k, 1, (s,), kc), Operand(b, n, 1, (s,), kc * n), part, m_all, n, kc)
            row_kernel(ctx, part, [0], [sum_stat(compute_type(out.dtype))], row_outs=[("out", out, "s0")])
            return
        matmul(ctx, Operand(a, k, 1), Operand(b, n, 1), out, m_all, n, k, **kw)
        return
    opa = Operand(a, k, 1, ab, D.mul(m, k))
    opb = Operand(b, n, 1, bb, D.mul(k, n))
    matmul(ctx, opa, opb, out, m, n, k, **kw)


SPLIT_K_MAX = 16384  # a slice's K when a MatMul's K passes the loop limit


def _split_k(k) -> int | None:
    """The fewest slices of a static K >= the loop limit that divide it into slices of at most SPLIT_K_MAX."""
    if not isinstance(k, int) or k < LOOP_BUDGET:
        return None
    return next((s for s in range(2, k) if k % s == 0 and k // s <= SPLIT_K_MAX), None)


def zero_point(ctx, i: int, period):
    """A zero-point input for the matmul kernel: (tensor, None) per tensor, (tensor, period) per line."""
    if not ctx.has_input(i):
        return None
    t = ctx.inputs[i]
    if t.numel == 1:
        return (t, None)
    if t.numel == period:
        return (t, period)
    raise ctx.unsupported(f"zero point of shape {list(t.shape)}")


@lowering("MatMulInteger")
def lower_matmul_integer(ctx) -> None:
    a, b = ctx.inputs[0], ctx.inputs[1]
    out = ctx.output(0, "int32", matmul_shape(ctx, a, b))
    m = a.shape[-2] if a.rank > 1 else 1
    n = b.shape[-1] if b.rank > 1 else 1
    matmul_into(ctx, a, b, out, zero_points=(zero_point(ctx, 2, m), zero_point(ctx, 3, n)), acc_type="i32")


@lowering("QLinearMatMul")
def lower_qlinear_matmul(ctx) -> None:
    a, a_scale, _, b, b_scale, _, y_scale, y_zero = ctx.inputs[:8]
    shape = matmul_shape(ctx, a, b)
    acc = ctx.temp("int32", shape)
    m = a.shape[-2] if a.rank > 1 else 1
    n = b.shape[-1] if b.rank > 1 else 1
    matmul_into(ctx, a, b, acc, zero_points=(zero_point(ctx, 2, m), zero_point(ctx, 5, n)), acc_type="i32")
    if a_scale.numel != 1 and a.rank > 1:
        a_scale = view(ctx, a_scale, (m, 1))
    out = ctx.output(0, y_zero.dtype if y_zero is not None else a.dtype, shape)
    requantize(ctx, acc, [a_scale, b_scale], y_scale, y_zero, out)


def requantize(ctx, acc, scales: list, y_scale, y_zero, out) -> None:
    """out = saturate(round(acc * prod(scales) / y_scale) + y_zero), elementwise with broadcasting."""
    lo, hi = (-128, 127) if out.dtype == "int8" else (0, 255)
    ct = compute_type(out.dtype)
    inputs = [acc] + list(scales) + [y_scale] + ([y_zero] if y_zero is not None else [])

    def expr(c, v, it, ot):
        scale = f"(({' * '.join(v[1:1 + len(scales)])}) / {v[1 + len(scales)]})"
        q = f"exact_round_f(i32({v[0]}), {scale})"
        if y_zero is not None:
            q += f" + f32({v[-1]})"
        return f"{ct}(clamp({q}, {lo}.0, {hi}.0))"

    elementwise(ctx, expr, inputs, out)


# round-half-even of the exact product acc * s, as ONNX's reference computes it (in float64): the f32 product
# alone rounds wrongly next to .5. acc is split so both parts convert exactly; Dekker's two-product gives
# each product's rounding error (no fma: Vulkan does not promise a fused one).
EXACT_ROUND = """fn split_f(a: f32) -> vec2<f32> {
  let c = 4097.0 * a;
  let hi = c - (c - a);
  return vec2<f32>(hi, a - hi);
}
fn two_prod_err(a: f32, b: f32, p: f32) -> f32 {
  let x = split_f(a);
  let y = split_f(b);
  return ((x.x * y.x - p) + x.x * y.y + x.y * y.x) + x.y * y.y;
}
fn exact_round_f(acc: i32, s: f32) -> f32 {
  let lo = acc & 4095;
  let xh = f32(acc - lo);
  let xl = f32(lo);
  let p1 = xh * s;
  let p2 = xl * s;
  let sum = p1 + p2;
  let bb = sum - p1;
  let err = two_prod_err(xh, s, p1) + two_prod_err(xl, s, p2) + ((p1 - (sum - bb)) + (p2 - bb));
  let r = round(sum);
  let d = (sum - r) + err;
  let odd = (r % 2.0) != 0.0;
  return r + select(0.0, sign(d), abs(d) > 0.5 || (abs(d) == 0.5 && odd));
}"""
HELPERS.setdefault("exact_round_f", EXACT_ROUND)


def view(ctx, t, shape):
    """The same storage seen with another shape (a per-channel vector as [C, 1, 1])."""
    if t.value is not None:
        return _weight(ctx, t.value.reshape([int(d) for d in shape]))
    return ctx._l.program.new_tensor(t.dtype, tuple(shape), alias=t)


@lowering("Gemm")
def lower_gemm(ctx, **epilogue) -> None:
    a, b = ctx.inputs[0], ctx.inputs[1]
    ta, tb = int(ctx.attr("transA", 0)), int(ctx.attr("transB", 0))
    if a.rank != 2 or b.rank != 2:
        raise ctx.unsupported("Gemm operands must be matrices")
    m, k = (a.shape[1], a.shape[0]) if ta else (a.shape[0], a.shape[1])
    n = b.shape[0] if tb else b.shape[1]
    opa = Operand(a, 1, m) if ta else Operand(a, k, 1)
    if b.value is not None and tb:
        b = _weight(ctx, np.ascontiguousarray(b.value.T))  # a constant: store it K x N
        tb = 0
    opb = Operand(b, 1, k) if tb else Operand(b, n, 1)
    out = ctx.output(0, a.dtype, (m, n))
    c = None
    if ctx.has_input(2):
        ct = ctx.inputs[2]
        if ct.rank > 2:
            raise ctx.unsupported("Gemm's C has rank > 2")
        strides = broadcast_strides(ct.shape, (m, n))
        c = (ct, strides[0], strides[1])
    matmul(ctx, opa, opb, out, m, n, k, alpha=float(ctx.attr("alpha", 1.0)), c=c,
           beta=float(ctx.attr("beta", 1.0)), **epilogue)


def _weight(ctx, value: np.ndarray):
    """A pre-transformed constant (a weight laid out for the kernel at build time)."""
    return ctx._l.constant(np.ascontiguousarray(value))
