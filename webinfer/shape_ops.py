"""Shape arithmetic over dims (webinfer.dims): the ONE evaluator that graph/shapes.py (before the rewrites) and the
lowerings (codegen: host elementwise ops, conv/pool windows) share, so the graph and the kernels agree on every
shape. Standard library only, like dims.py.
"""

from __future__ import annotations

from .dims import Dim, add, ceildiv, dmax, dmin, exact_div, floordiv, mod, mul, nonnegative, to_text


def window_axis(size: Dim, kernel: int, stride: int, dilation: int, pb: int, pe: int, ceil_mode: bool = False,
                auto_pad: str = "NOTSET") -> tuple[Dim, Dim, Dim]:
    """One spatial axis of a Conv/ConvInteger/pooling window, ONNX's formulas: (output size, begin pad, end pad).
    The one rule graph/shapes.py and the lowerings (codegen/kernels/conv.window) both use."""
    eff = (kernel - 1) * dilation + 1
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = ceildiv(size, stride)
        total = dmax(add(add(mul(add(out, -1), stride), eff), mul(size, -1)), 0)
        lo = floordiv(total, 2) if auto_pad == "SAME_UPPER" else add(total, mul(floordiv(total, 2), -1))
        return out, lo, add(total, mul(lo, -1))
    if auto_pad == "VALID":
        pb = pe = 0
    span = add(size, pb + pe - eff)
    if not ceil_mode:
        return add(floordiv(span, stride), 1), pb, pe
    out = add(ceildiv(span, stride), 1)
    if isinstance(out, int) and (out - 1) * stride >= size + pb:
        out -= 1
    elif not isinstance(out, int):  # the last window must start inside the input or its begin pad
        out = dmin(out, ceildiv(add(size, pb), stride))
    return out, pb, pe


class Undecidable(Exception):
    """A comparison of symbolic dims that no binding of the names decides one way."""


def _trunc_div(a: Dim, b: Dim) -> Dim:
    """ONNX's integer Div (truncating); on dims, which are sizes (>= 0), that is an exact or floor division."""
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return exact_div(a, b)


def compare(op: str, a: Dim, b: Dim) -> int:
    """One element of an ONNX comparison (1 or 0); raises Undecidable when the dims do not decide it."""
    if isinstance(a, int) and isinstance(b, int):
        return int({"Equal": a == b, "Less": a < b, "Greater": a > b, "LessOrEqual": a <= b,
                    "GreaterOrEqual": a >= b}[op])
    if op in ("Greater", "GreaterOrEqual"):
        return compare("Less" if op == "Greater" else "LessOrEqual", b, a)
    diff = add(b, mul(a, -1))  # b - a
    if op == "Equal":
        if diff == 0:
            return 1
        if isinstance(diff, int) or nonnegative(add(diff, -1)) or nonnegative(add(mul(diff, -1), -1)):
            return 0
    else:
        strict = op == "Less"
        if nonnegative(add(diff, -1) if strict else diff):
            return 1
        if nonnegative(mul(diff, -1) if strict else add(mul(diff, -1), -1)):
            return 0
    raise Undecidable(f"{op}({to_text(a)}, {to_text(b)})")


def _abs(a: Dim) -> Dim:
    if isinstance(a, int) or nonnegative(a):
        return abs(a) if isinstance(a, int) else a
    if nonnegative(mul(a, -1)):
        return mul(a, -1)
    raise Undecidable(f"Abs({to_text(a)})")


def host_op(op: str, args: list) -> Dim:
    """Evaluate one element of ``op`` (a key of HOST_OPS); Max and Min take any number of inputs."""
    fn = HOST_OPS[op]
    if op in ("Max", "Min") and len(args) != 2:
        out = args[0]
        for x in args[1:]:
            out = fn(out, x)
        return out
    return fn(*args)


def _truth(c: Dim) -> bool:
    if not isinstance(c, int):
        raise Undecidable(to_text(c))
    return bool(c)


# ONNX ops on the elements of small integer tensors (graph/shapes.py, codegen/kernels/elementwise.py)
HOST_OPS = {
    "Add": add, "Sub": lambda a, b: add(a, mul(b, -1)), "Mul": mul, "Div": _trunc_div, "Mod": mod,
    "Max": dmax, "Min": dmin, "Neg": lambda a: mul(a, -1), "Abs": lambda a: _abs(a),
    "Identity": lambda a: a, "Where": lambda c, a, b: a if _truth(c) else b,
    **{op: (lambda o: lambda a, b: compare(o, a, b))(op)
       for op in ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual")},
}
BOOL_OPS = frozenset({"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"})


def squeezed_axes(x: tuple, declared_rank: int | None) -> set[int]:
    """The axes a Squeeze without ``axes`` drops: its static 1s, and its symbolic dims too where the declared output
    rank says the exporter saw them squeezed (a batch traced at 1; the lowering guards them == 1). Otherwise the
    symbolic dims are kept."""
    ones = {i for i, d in enumerate(x) if d == 1}
    symbolic = {i for i, d in enumerate(x) if not isinstance(d, int)}
    if symbolic and declared_rank == len(x) - len(ones) - len(symbolic):
        return ones | symbolic
    return ones


def traced_squeeze_fits(x: tuple, declared: list, input_dims: set) -> bool:
    """Whether a Squeeze without axes that drops ``x``'s symbolic dims (as an exporter tracing them at 1 did) can
    give the ``declared`` output dims (ints, or symbolic dims whose ``value`` is a name or None). A traced export
    writes the static sizes it saw, or a name of the graph inputs' dims (its dynamic axes: speechmos' AECMOS head
    declares ['batch_size'] for the [2] it gives); a fresh name, or another size, where the drop leaves a static
    size other than 1 says the shape was not traced (a converter that declares every output [n]): not trusted."""
    kept = [d for d in x if d != 1 and isinstance(d, int)]
    if len(declared) != len(kept) or all(isinstance(d, int) for d in x):
        return True
    for want, size in zip(declared, kept):
        name = None if isinstance(want, int) else getattr(want, "value", None)
        fresh = isinstance(name, str) and name not in input_dims
        if size != 1 and (fresh or isinstance(want, int) and want != size):
            return False
    return True


def host_op_or_none(op: str, args: list) -> Dim | None:
    """One element of shape arithmetic (host_op); None when an input is unknown or it cannot be decided."""
    if any(a is None for a in args):
        return None
    try:
        return host_op(op, args)
    except Undecidable:
        return None
