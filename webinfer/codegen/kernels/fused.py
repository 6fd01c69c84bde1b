"""Ops of webinfer's own domain written by the fusion passes (graph/passes/fuse_*.py).

An elementwise *program* is encoded in three attributes that name ops of OUR table (``elementwise.OPS``)
and say where each step's arguments come from:

- ``ops`` (strings): one op name per step; a name not in the table is an error, never WGSL text;
- ``arity`` (ints): the number of arguments of each step;
- ``args`` (ints, flattened): ``r < n_in`` is program input ``r``; ``n_in + j`` is step ``j``'s result;
  ``-1`` an absent optional argument (Clip's min);
- ``s{j}_{name}``: step ``j``'s own attributes (alpha, to, ...), read by the op's expression builder.

The result is the last step's. ``FusedElementwise``'s program inputs are the node's inputs.
``FusedMatMul`` / ``FusedGemm`` / ``FusedConv`` keep their base op's inputs (2, 3 and 3) and attributes;
program input 0 is the base op's result and input ``i >= 1`` is the node's input ``base + i - 1``. The
program runs inside the matmul/conv kernel when every extra input is a scalar, a per-channel/per-column
vector or a tensor of the output's shape (one load each); otherwise it falls back to the base kernel plus
one fused elementwise kernel. ``FusedLayerNormalization`` / ``FusedRMSNormalization`` (3 and 2 base inputs) run
the program per element of the norm's row kernel, reading each extra per element of x, per element of the row
or as one value. Scalar constants become WGSL literals instead of bindings.
"""

from __future__ import annotations

from onnx.helper import tensor_dtype_to_np_dtype

from ... import dims as D
from ...opschema import fused_base_inputs
from ..emit import wgsl_literal
from ..registry import WEBINFER_DOMAIN, lowering
from . import conv as conv_k
from . import elementwise as ew
from . import image, norm, resize
from . import matmul as mm
from . import quant_matmul as qmm
from ._floats import helper_sources
from .elementwise_ops import narrow
from .helpers import broadcast_shapes, compute_type

BASE_INPUTS = fused_base_inputs()  # FusedMatMul: 2, FusedGemm: 3, FusedConv: 3, FusedMatMulQ: 5, norms: 3 / 2

# Activations and norms recognised from their primitive spellings (fuse_activations.py, fuse_norms.py)
# are written as webinfer-domain ops with ONNX's semantics, so that any opset can carry them.
lowering("Gelu", "Swish", domain=WEBINFER_DOMAIN)(ew.lower_elementwise)
lowering("LayerNormalization", domain=WEBINFER_DOMAIN)(norm.lower_layer_norm)
lowering("RMSNormalization", domain=WEBINFER_DOMAIN)(norm.lower_rms_norm)


class _StepAttrs:
    """What an expression builder of the table sees: the attributes of one step."""

    def __init__(self, ctx, step: int, out_dtype: str):
        self._ctx, self._step, self._out = ctx, step, out_dtype

    def attr(self, name, default=None):
        if name == "to_dtype":
            return self._out
        return self._ctx.attr(f"s{self._step}_{name}", default)


def _step_dtype(ctx, step: int, rule: str, args: list) -> str:
    if rule == "bool":
        return "bool"
    if rule == "cast":
        return tensor_dtype_to_np_dtype(int(ctx.attr(f"s{step}_to"))).name
    if rule == "where":
        return args[1][1]
    return next(dt for e, dt in args if dt is not None)


def compose(ctx, sources: list[tuple[str, str]]) -> tuple[list[str], str, str]:
    """WGSL ``let`` lines computing the node's program over ``sources`` ((expression, dtype) per input).

    Returns (lines, name of the result, its dtype)."""
    ops, arity, refs = ctx.attr("ops") or [], ctx.attr("arity") or [], ctx.attr("args") or []
    if not ops or len(ops) != len(arity) or sum(arity) != len(refs):
        raise ctx.unsupported("malformed elementwise program")
    values = list(sources)
    lines, pos = [], 0
    for j, (op, k) in enumerate(zip(ops, arity)):
        if op not in ew.OPS:
            raise ctx.unsupported(f"step {j}: op {op!r} is not in the elementwise table")
        args = []
        for r in refs[pos:pos + k]:
            if r >= len(values) or r < -1:
                raise ctx.unsupported(f"step {j}: argument {r} refers to a later step")
            args.append(values[r] if r >= 0 else ("", None))
        pos += k
        build, rule = ew.OPS[op]
        dt = _step_dtype(ctx, j, rule, args)
        expr = build(_StepAttrs(ctx, j, dt), [e for e, _ in args], [d for _, d in args], compute_type(dt))
        if op in ew._WRAPPING and dt in ("uint8", "uint16", "int8", "int16"):
            expr = narrow(expr, dt)
        lines.append(f"let t{j} = {expr};")
        values.append((f"t{j}", dt))
    return lines, values[-1][0], values[-1][1]


def _literal(t) -> str | None:
    """A WGSL literal for a constant single-element input (no binding needed), else None."""
    if t is None or t.value is None or t.value.size != 1:
        return None
    return wgsl_literal(t.value.reshape(-1)[0].item(), compute_type(t.dtype))


def _helpers(text: str) -> list[str]:
    return helper_sources(text, ew.HELPERS)


@lowering("FusedElementwise", domain=WEBINFER_DOMAIN)
def lower_fused_elementwise(ctx) -> None:
    run_program(ctx, list(ctx.inputs))


def run_program(ctx, inputs: list) -> None:
    """One broadcasting elementwise kernel computing the program over ``inputs`` into output 0."""
    present = [t for t in inputs if t is not None]
    shape = broadcast_shapes([t.shape for t in present])
    ew.assume_broadcast(ctx, [t.shape for t in present], shape)
    bound, sources, uniforms = [], [], {}
    for i, t in enumerate(inputs):
        lit = (_literal(t) or ew.symbolic_scalar(t, f"c{i}", uniforms)) if t is not None else None
        if t is None:
            sources.append(("", None))
        elif lit is not None:
            sources.append((lit, t.dtype))
        else:
            sources.append((f"v{len(bound)}", t.dtype))
            bound.append(t)
    lets, result, dt = compose(ctx, sources)
    out = ctx.output(0, dt, shape)
    params, rank, scalar, contiguous = ew.index_space(bound, out)
    ctx.dispatch("elementwise.wgsl.j2", {f"x{k}": ctx.gpu(t) for k, t in enumerate(bound)}, {"out": out},
                 work=out.numel, params={**params, **uniforms}, arity=len(bound), rank=rank,
                 contiguous=contiguous, scalar=scalar, expr=result, lets=lets, helpers=_helpers("\n".join(lets)),
                 in_types=[compute_type(t.dtype) for t in bound])


# -- epilogues ---------------------------------------------------------------------------------------
_BASE = {"FusedMatMul": mm.lower_matmul, "FusedGemm": mm.lower_gemm, "FusedConv": conv_k.lower_conv,
         "FusedMatMulQ": qmm.lower_matmul_q, "FusedResize": resize.lower_resize,
         "FusedImageResize": image.lower_image_resize}
_RESIZES = {"FusedResize": resize.resize_plan, "FusedImageResize": image.image_plan}  # row: axis 1, col: the last


def _base_shape(ctx) -> tuple | None:
    """The base op's output shape; None when it runs no kernel (a Resize that resizes nothing is a view)."""
    if ctx.op in _RESIZES:
        axes, _, _, shape = _RESIZES[ctx.op](ctx)
        return tuple(shape) if axes else None
    a, b = ctx.inputs[0], ctx.inputs[1]
    if ctx.op == "FusedMatMul":
        return tuple(mm.matmul_shape(ctx, a, b))
    if ctx.op == "FusedMatMulQ":
        return tuple(a.shape[:-1]) + (int(ctx.attr("n")),)
    if ctx.op == "FusedGemm":
        m = a.shape[1] if int(ctx.attr("transA", 0)) else a.shape[0]
        n = b.shape[0] if int(ctx.attr("transB", 0)) else b.shape[1]
        return (m, n)
    cs = conv_k.conv_shape(ctx, b, False)
    return (a.shape[0], cs.cout) + tuple(conv_k.window(ctx, list(a.shape[2:]), cs.kernel).out)


def _index(ctx, t, out_shape: tuple) -> str | None:
    """How the epilogue reads an extra input of shape ``t.shape`` at an output element, or None."""
    rank = len(out_shape)
    if len(t.shape) > rank:
        return None
    shape = (1,) * (rank - len(t.shape)) + tuple(t.shape)
    if D.is_static(shape) and D.product(shape) == 1:
        return "0u"
    if shape == tuple(out_shape):
        return "idx"
    ones = [i for i, d in enumerate(shape) if d != 1]
    if len(ones) != 1 or shape[ones[0]] != out_shape[ones[0]]:
        return None
    axis = ones[0]
    if ctx.op in _RESIZES:
        return "row" if axis == 1 else "col" if axis == rank - 1 else None
    if ctx.op == "FusedConv":
        return "row" if axis == 1 else None
    if axis == rank - 1 and (ctx.op in ("FusedGemm", "FusedMatMulQ") or ctx.inputs[1].rank > 1):
        return "col"
    if ctx.op == "FusedGemm" and axis == 0:
        return "row"
    return None


def _program_lines(ctx, bases: tuple, dtype: str, extras: list, index_of):
    """WGSL lines computing the node's program after its base results ``bases`` (of ``dtype``): one load per
    extra input at ``index_of(t)`` (constant single values inline), then the program's steps. Returns (lines,
    result, reads), or None when an extra cannot be indexed or the result's type is not ``dtype``."""
    sources, reads, loads = [(b, dtype) for b in bases], {}, []
    for t in extras:
        lit = _literal(t)
        if lit is not None:
            sources.append((lit, t.dtype))
            continue
        index = index_of(t)
        if index is None:
            return None
        name = f"e{len(reads)}"
        reads[name] = t
        loads.append(f"let u{len(loads)} = ld_{name}({index});")
        sources.append((f"u{len(loads) - 1}", t.dtype))
    lets, result, dt = compose(ctx, sources)
    return (loads + lets, result, reads) if dt == dtype else None


def _epilogue_fn(ctx, out_shape: tuple, out_dtype: str, extras: list | None = None,
                 bases: tuple = ("base",)) -> tuple[str, dict] | None:
    """The WGSL ``epi(base, row, col, idx)`` computing the program after the base op, with its extra reads.
    ``extras``: the program's inputs after the base results (by default the node's inputs past its base op's);
    ``bases``: the names of the results the kernel passes (a paired matmul passes two)."""
    extras = ctx.inputs[BASE_INPUTS[ctx.op]:] if extras is None else extras
    ct = compute_type(out_dtype)
    found = _program_lines(ctx, bases, out_dtype, extras, lambda t: _index(ctx, t, out_shape))
    if found is None:
        return None
    lines, result, reads = found
    body = "\n  ".join(lines)
    helpers = "\n".join(_helpers(body))
    args = "".join(f"{b}: {ct}, " for b in bases)
    fn = f"{helpers}\nfn epi({args}row: u32, col: u32, idx: u32) -> {ct} {{\n  {body}\n  return {result};\n}}"
    return fn, reads


@lowering("FusedMatMul", "FusedGemm", "FusedConv", "FusedMatMulQ", "FusedResize", "FusedImageResize",
          domain=WEBINFER_DOMAIN)
def lower_fused_epilogue(ctx) -> None:
    base = _BASE[ctx.op]
    extras = ctx.inputs[BASE_INPUTS[ctx.op]:]
    dtype = "float32" if ctx.op == "FusedImageResize" else ctx.inputs[0].dtype  # (RGBA8 pixels in, f32 out)
    out_shape = _base_shape(ctx)
    fits = out_shape is not None and dtype == "float32" and broadcast_shapes([out_shape] + [t.shape for t in extras]) == tuple(out_shape)
    plan = _epilogue_fn(ctx, out_shape, dtype) if fits else None
    if plan is not None:
        ew.assume_broadcast(ctx, [t.shape for t in extras], tuple(out_shape))
        base(ctx, epilogue_fn=plan[0], extra_reads=plan[1])
        return
    base(ctx)  # then the program as its own kernel over the base result
    run_program(ctx, [ctx.outputs[0]] + list(extras))


def _norm_index(t, x_shape: tuple, axis: int) -> str | None:
    """How a norm's epilogue reads an extra input at element ``o`` (``r``: its index along the normalized
    axes), or None: one value, one per element of x, or one per element of a row."""
    rank = len(x_shape)
    if len(t.shape) > rank:
        return None
    shape = (1,) * (rank - len(t.shape)) + tuple(t.shape)
    if D.is_static(shape) and D.product(shape) == 1:
        return "0u"
    if shape == x_shape:
        return "o"
    if all(d == 1 for d in shape[:axis]) and shape[axis:] == x_shape[axis:]:
        return "r"
    return None


def _norm_epilogue(ctx, extras: list):
    """``epilogue(norm expression)`` for norm.lower_*_norm: (WGSL lines, result, reads, helpers), or None when an
    extra input cannot be read per element (then the program runs as a kernel of its own)."""
    x = ctx.inputs[0]
    axis = int(ctx.attr("axis", -1)) % x.rank
    found = None
    if x.dtype == "float32":
        found = _program_lines(ctx, ("nv",), x.dtype, extras, lambda t: _norm_index(t, tuple(x.shape), axis))
    if found is None:
        return None
    program, result, reads = found

    def epilogue(expr: str):
        lines = [f"let nv = {expr};", *program]
        return lines, result, reads, _helpers("\n".join(lines))

    return epilogue


@lowering("FusedLayerNormalization", "FusedRMSNormalization", domain=WEBINFER_DOMAIN)
def lower_fused_norm(ctx) -> None:
    """A norm and the program after it (a post-norm's residual Add) in the norm's row kernel."""
    base = norm.lower_layer_norm if ctx.op == "FusedLayerNormalization" else norm.lower_rms_norm
    extras = list(ctx.inputs[BASE_INPUTS[ctx.op]:])
    epilogue = _norm_epilogue(ctx, extras)
    if epilogue is not None:
        base(ctx, epilogue=epilogue)
        return
    base(ctx)  # then the program as its own kernel over the norm's result
    run_program(ctx, [ctx.outputs[0]] + extras)


@lowering("PairedMatMulQ", domain=WEBINFER_DOMAIN)
def lower_paired_matmul_q(ctx) -> None:
    """Two packed matmuls of one x and a program over both results (graph/passes/pair_matmuls.py). The decode
    GEMV computes both in one kernel (``epi(base, base2, ...)``, quant_matmul.pairs_gemv says where); every
    other step runs the partner's matmul into a temporary that the first one's epilogue reads."""
    ins = list(ctx.inputs) + [None] * (qmm.PAIRED_INPUTS - len(ctx.inputs))  # (trailing absent inputs drop)
    x, extras = ins[0], ins[qmm.PAIRED_INPUTS:]
    out_shape = tuple(x.shape[:-1]) + (int(ctx.attr("n")),)
    fits = x.dtype == "float32" and broadcast_shapes([out_shape] + [t.shape for t in extras]) == out_shape
    partner_inputs = [x, *ins[5:8], ins[4]]
    paired = _epilogue_fn(ctx, out_shape, "float32", extras, ("base", "base2")) if fits else None
    steps = ("gemm",) if paired is not None and qmm.pairs_gemv(ctx) else ("gemv", "gemm")
    partner = qmm.partner_result(ctx, partner_inputs, steps)
    single = _epilogue_fn(ctx, out_shape, "float32", [partner] + extras) if fits and partner is not None else None
    if single is not None:
        qmm.lower_matmul_q(ctx, epilogue_fn=single[0], extra_reads=single[1], steps=steps)
    elif partner is not None:  # the matmul, then the program as its own kernel over both results
        qmm.lower_matmul_q(ctx, steps=steps)
        run_program(ctx, [ctx.outputs[0], partner] + extras)
    else:  # only the paired GEMV ever runs
        ctx.output(0, "float32", out_shape)
    if steps == ("gemm",):
        qmm.paired_gemv(ctx, partner_inputs, paired[0], paired[1])
