"""Einsum: a two-operand contraction becomes the strided matmul (transposing an operand or the result with
the movement kernel only when its letters are out of order); anything else (one or many operands,
diagonals, sums over a letter of one operand) runs in a generic kernel with one invocation per output
element looping over the contracted letters. The equation is parsed here and never reaches WGSL.
"""

from __future__ import annotations

from ... import dims as D
from ...errors import WebinferError
from ..registry import lowering
from .helpers import compute_type, contiguous_strides
from .loop_limit import check_loop
from .matmul import Operand, matmul
from .movement import Axis, remap


def parse_equation(eq: str, ranks: list[int]) -> tuple[list[list[str]], list[str]]:
    """Letters per operand and of the output; an ellipsis becomes placeholder letters (right-aligned)."""
    eq = eq.replace(" ", "")
    lhs, rhs = eq.split("->") if "->" in eq else (eq, None)
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise WebinferError(f"einsum equation has {len(terms)} operands, the node has {len(ranks)}")
    n_ell = max((r - len(t.replace("...", "")) for t, r in zip(terms, ranks) if "..." in t), default=0)
    ell = [f"...{i}" for i in range(n_ell)]
    ins = [_letters(t, r, ell) for t, r in zip(terms, ranks)]
    if rhs is None:
        counts: dict[str, int] = {}
        for t in ins:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = [e for e in ell if e in counts] + sorted(c for c, k in counts.items() if k == 1 and c not in ell)
    else:
        out = _letters(rhs, None, ell)
    return ins, out


def _letters(term: str, rank: int | None, ell: list[str]) -> list[str]:
    if "..." not in term:
        if rank is not None and len(term) != rank:
            raise WebinferError(f"einsum term {term!r} does not match rank {rank}")
        return list(term)
    head, tail = term.split("...")
    k = len(ell) if rank is None else rank - len(head) - len(tail)
    return list(head) + ell[len(ell) - k:] + list(tail)


@lowering("Einsum")
def lower_einsum(ctx) -> None:
    xs = [t for t in ctx.inputs if t is not None]
    eq = ctx.attr("equation")
    eq = eq.decode() if isinstance(eq, bytes) else eq
    ins, out_letters = parse_equation(eq, [x.rank for x in xs])
    sizes = letter_sizes(xs, ins)
    out = ctx.output(0, xs[0].dtype, tuple(sizes[c] for c in out_letters))
    if len(xs) == 2 and _matmul_form(ins, out_letters):
        einsum_matmul(ctx, xs, ins, out_letters, sizes, out)
    else:
        einsum_generic(ctx, xs, ins, out_letters, sizes, out)


def letter_sizes(xs, ins) -> dict:
    sizes: dict = {}
    for x, letters in zip(xs, ins):
        for c, d in zip(letters, x.shape):
            if c not in sizes or sizes[c] == 1:
                sizes[c] = d
    return sizes


def letter_strides(x, letters, sizes) -> dict:
    """Per letter, the element stride in ``x`` (summed over repeated letters: a diagonal; 0 if broadcast)."""
    out: dict = {}
    for c, d, s in zip(letters, x.shape, contiguous_strides(x.shape)):
        step = 0 if (d == 1 and sizes[c] != 1) else s
        out[c] = D.add(out.get(c, 0), step)
    return out


def einsum_generic(ctx, xs, ins, out_letters, sizes, out) -> None:
    if len(xs) > 7:
        raise ctx.unsupported("more than 7 einsum operands")
    strides = [letter_strides(x, letters, sizes) for x, letters in zip(xs, ins)]
    summed = [c for c in dict.fromkeys(sum(ins, [])) if c not in out_letters]
    params: dict = {"n": out.numel}
    for d, c in enumerate(out_letters):
        params[f"od{d}"] = sizes[c]
        for k, st in enumerate(strides):
            params[f"s{k}_{d}"] = st.get(c, 0)
    for j, c in enumerate(summed):
        params[f"cd{j}"] = sizes[c]
        for k, st in enumerate(strides):
            params[f"c{k}_{j}"] = st.get(c, 0)
    check_loop(ctx, D.product([sizes[c] for c in summed]), "the summed size")
    ctx.dispatch("einsum.wgsl.j2", {f"x{k}": ctx.gpu(x) for k, x in enumerate(xs)}, {"out": out},
                 work=out.numel, params=params, arity=len(xs), rank=len(out_letters), n_sum=len(summed),
                 ct=compute_type(out.dtype))


def _matmul_form(ins, out_letters) -> bool:
    a, b = ins
    if len(set(a)) != len(a) or len(set(b)) != len(b):
        return False
    return all(c in a and c in b for c in set(a) | set(b) if c not in out_letters)


def einsum_matmul(ctx, xs, ins, out_letters, sizes, out) -> None:
    a, b = ins
    batch = [c for c in out_letters if c in a and c in b]
    m = [c for c in out_letters if c in a and c not in b]
    n = [c for c in out_letters if c in b and c not in a]
    k = [c for c in a if c not in out_letters]
    msize, nsize, ksize = (D.product([sizes[c] for c in g]) for g in (m, n, k))
    opa = _operand(ctx, xs[0], a, batch, m, k, sizes, msize, ksize)
    opb = _operand(ctx, xs[1], b, batch, k, n, sizes, ksize, nsize)
    natural = batch + m + n
    if natural == out_letters:
        matmul(ctx, opa, opb, out, msize, nsize, ksize)
        return
    tmp = ctx.temp(out.dtype, tuple(sizes[c] for c in natural))
    matmul(ctx, opa, opb, tmp, msize, nsize, ksize)
    st = dict(zip(natural, contiguous_strides(tmp.shape)))
    remap(ctx, tmp, out, [Axis(sizes[c], st[c]) for c in out_letters])


def _operand(ctx, x, letters, batch, rows, cols, sizes, nrows, ncols) -> Operand:
    """x as a [batch..., rows, cols] matrix operand: by strides when its letters allow, else a copy."""
    own = [x.shape[letters.index(c)] for c in batch]
    if letters == batch + rows + cols:
        return Operand(x, ncols, 1, tuple(own), D.mul(nrows, ncols))
    if letters == batch + cols + rows:
        return Operand(x, 1, nrows, tuple(own), D.mul(nrows, ncols))
    order = batch + rows + cols
    st = dict(zip(letters, contiguous_strides(x.shape)))
    shape = tuple(own) + tuple(sizes[c] for c in rows + cols)
    tmp = ctx.temp(x.dtype, shape)
    remap(ctx, x, tmp, [Axis(d, st[c]) for c, d in zip(order, shape)])
    return Operand(tmp, ncols, 1, tuple(own), D.mul(nrows, ncols))
