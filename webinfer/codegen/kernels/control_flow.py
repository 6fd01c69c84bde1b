"""If, Loop and Scan: subgraphs lowered into ranges of steps that the runtime drives from the host
(runtime/control_flow.py), every iteration's data work still a WGSL kernel.

- If: a condition known at build time lowers only its branch, inline. Otherwise both branches are lowered
  one after the other, each ending with copies of its outputs into the If's outputs; per run the runtime reads
  the condition (a feed, or 4 bytes read back) and dispatches one of the two ranges. No rebuild.
- Loop and Scan: the body is lowered once. Carried values live in the body's input tensors: copied in
  before the loop, copied back from the body's outputs at the end of each iteration, and they are the final
  values. Scan inputs are sliced ("take") and scan outputs stacked ("put") by kernels whose position is the
  iteration index, a dim ``__loopK_i`` that the runtime sets per iteration (uniforms rewritten, so one
  submit per iteration when the body depends on it). Loop's ``iter_num`` is that dim; ``cond_in`` is true
  (an iteration only runs while the condition holds).
- The iteration count is static (a constant trip count with no data-dependent condition; Scan: its scan
  axis, possibly symbolic), or the bounded dim ``__loopK_n`` that the runtime sets when the loop ends: a
  loop runs at most its constant trip count, else ``LOOP_BOUND`` iterations (scan outputs are allocated for
  that many), and a run that needs more stops with an error. A data-dependent trip count or condition costs a
  4-byte read back (once, or per iteration for the condition).
"""

from __future__ import annotations

import json

import numpy as np

from ... import dims as D
from ...errors import UnsupportedOpError
from ...graph.passes.loop_counters import COUNTERS
from .. import guard_scopes
from ..nested import OptValue, SeqValue, is_nested
from ..program import Tensor
from ..registry import lowering
from .helpers import normalize_axis
from .sequence import stack

LOOP_BOUND = 4096  # iterations of a loop whose count is known only at run time (scan outputs are sized for it)
UNROLL_MAX = 256  # iterations of a loop unrolled at build time (one that carries a sequence)


def _graph(ctx, name: str):
    a = ctx.node.attributes.get(name)
    if a is None:
        raise ctx.unsupported(f"missing attribute {name}")
    return a.value


def host_value(t: Tensor | None):
    """The int value of a one-element tensor known at build time (possibly a symbolic dim), else None."""
    if t is None:
        return None
    if t.value is not None and t.value.size == 1:
        return int(np.asarray(t.value).reshape(-1)[0])
    if t.sym is not None and len(t.sym) == 1:
        return t.sym[0]
    return None


def scalar_spec(ctx, t: Tensor | None) -> dict | None:
    """How the runtime gets a scalar: {"dim": expression} when known at build time, else {"tensor": id}."""
    if t is None:
        return None
    v = host_value(t)
    return {"dim": D.to_json(v)} if v is not None else {"tensor": ctx.gpu(t).id}


def copy(ctx, src: Tensor, dst: Tensor) -> None:
    if src.base is dst.base:
        return
    ctx.dispatch("control.wgsl.j2", {"src": ctx.gpu(src)}, {"dst": dst}, work=dst.numel,
                 params={"n": dst.numel}, kind="copy")


def _slice_kernel(ctx, kind: str, src: Tensor, dst: Tensor, outer, inner, count, pos) -> None:
    n = D.mul(outer, inner)
    ctx.dispatch("control.wgsl.j2", {"src": ctx.gpu(src)}, {"dst": dst}, work=n, kind=kind,
                 params={"n": n, "inner": inner, "T": count, "pos": pos})


def _same(a: Tensor, b: Tensor) -> bool:
    return a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)


class BranchChoiceNeeded(UnsupportedOpError):
    """An If whose condition compares symbolic dims and whose branches' outputs differ in rank or structure: one
    artifact holds one of them, so the build lowers the graph with each branch chosen (build.py
    ``lower_choosing_branches``) and keeps the one that gives the graph outputs their declared ranks."""

    def __init__(self, message: str, node):
        super().__init__(message)
        self.node = node


def _dim_predicate(ctx) -> tuple[str, object, object] | None:
    """(comparison, a, b) when the condition is a comparison of two dims known at build time (possibly symbolic),
    through Cast/Squeeze/Identity; else None."""
    v = ctx.node.inputs[0]
    p = v.producer() if v is not None else None
    while p is not None and p.op_type in ("Cast", "Squeeze", "Identity", "Reshape", "Unsqueeze"):
        p = p.inputs[0].producer() if p.inputs[0] is not None else None
    if p is None or p.op_type not in _GUARDS or len(p.inputs) != 2:
        return None
    try:
        a, b = (host_value(ctx._l.tensor_of(x)) for x in p.inputs)
    except Exception:
        return None
    return None if a is None or b is None else (p.op_type, a, b)


# comparison -> (guards when true, guards when false): expressions of (a, b) that must be >= 0
_GUARDS = {
    "Equal": (lambda a, b: [D.add(a, D.mul(b, -1)), D.add(b, D.mul(a, -1))], None),
    "Less": (lambda a, b: [D.add(D.add(b, D.mul(a, -1)), -1)], lambda a, b: [D.add(a, D.mul(b, -1))]),
    "Greater": (lambda a, b: [D.add(D.add(a, D.mul(b, -1)), -1)], lambda a, b: [D.add(b, D.mul(a, -1))]),
    "LessOrEqual": (lambda a, b: [D.add(b, D.mul(a, -1))], lambda a, b: [D.add(D.add(a, D.mul(b, -1)), -1)]),
    "GreaterOrEqual": (lambda a, b: [D.add(a, D.mul(b, -1))], lambda a, b: [D.add(D.add(b, D.mul(a, -1)), -1)]),
}


@lowering("If")
def lower_if(ctx) -> None:
    lw = ctx._l
    branches = (_graph(ctx, "then_branch"), _graph(ctx, "else_branch"))
    known = host_value(ctx.inputs[0])
    chosen = getattr(lw, "if_choices", {}).get(ctx.node)
    if chosen is not None and not isinstance(known, int):  # a dim predicate, decided by the build: guarded
        op, a, b = _dim_predicate(ctx)
        guards = _GUARDS[op][0 if chosen else 1]
        if guards is None:  # a != b: no guard of the form expr >= 0 says it
            raise ctx.unsupported(f"the branch for {op}({D.to_text(a)}, {D.to_text(b)}) == 0 cannot be guarded")
        for expr in guards(a, b):
            ctx.assume(expr, f"the branch built for {op}({D.to_text(a)}, {D.to_text(b)}) == {int(chosen)}")
        known = int(chosen)
    if isinstance(known, int):
        for i, t in enumerate(lw.lower_subgraph(branches[0 if known else 1], [], conditional=False)):
            ctx._set(i, t)
        return
    cond = scalar_spec(ctx, ctx.inputs[0])
    ranges, outs = [], None
    for g in branches:
        start = len(lw.program.steps)
        with guard_scopes.branch_scope(lw) as scope:  # (guards recorded in the branch: checked when it runs)
            results = lw.lower_subgraph(g, [])
        if outs is None:
            outs = [_fresh(ctx, t) for t in results]
            for i, out in enumerate(outs):
                ctx._set(i, out)
        flat = [_flatten(t) for t in results]
        if not all(_fits(f, _flatten(o)) for f, o in zip(flat, outs)) or len(flat) != len(outs):
            why = "the branches' outputs differ in type, shape or structure"
            # (in the main graph or an If branch, whose guards are checked when it runs; not in a loop body)
            if guard_scopes.can_guard(lw) and _dim_predicate(ctx) is not None:
                raise BranchChoiceNeeded(ctx.unsupported(why).args[0], ctx.node)
            raise ctx.unsupported(why)
        for ts, os in zip(flat, (_flatten(o) for o in outs)):
            for t, out in zip(ts, os):
                if not isinstance(t, str):
                    copy(ctx, t, out)
        ranges.append([start, len(lw.program.steps)])
        guard_scopes.close(lw, scope, start, len(lw.program.steps))
    lw.program.control.append({"kind": "if", "cond": cond, "branches": ranges})


def _fresh(ctx, value):
    """New tensors in the structure of ``value`` (a tensor, a sequence or an optional)."""
    if isinstance(value, SeqValue):
        return SeqValue([_fresh(ctx, t) for t in value], dtype=value.dtype)
    if isinstance(value, OptValue):
        return OptValue(None if value.value is None else _fresh(ctx, value.value))
    return ctx.temp(value.dtype, value.shape)


def _flatten(value) -> list:
    """The tensors of a value, and markers of its structure (so two branches' structures compare)."""
    if isinstance(value, SeqValue):
        return ["[", *[x for t in value for x in _flatten(t)], "]"]
    if isinstance(value, OptValue):
        return ["?", *(_flatten(value.value) if value.value is not None else [])]
    return [value]


def _fits(flat: list, outs: list) -> bool:
    """Whether a branch's results can be copied into the If's outputs (made from the then-branch's): the same
    structure and types, each tensor of the same shape up to axes of size 1 (Paddle's ``True`` in one branch and
    ``Cast(x[1])`` in the other: [] and [1]; onnxruntime gives whichever ran, the elements are the same)."""
    if len(flat) != len(outs):
        return False
    for t, o in zip(flat, outs):
        if isinstance(t, str) or isinstance(o, str):
            if t != o:
                return False
        elif t.dtype != o.dtype or [d for d in t.shape if d != 1] != [d for d in o.shape if d != 1]:
            return False
    return True


def _carry_back(ctx, outs: list[Tensor], ins: list[Tensor]) -> None:
    """End of an iteration: each carried output becomes the next iteration's input. An output that is another
    carried input's storage (a swap) goes through a temporary first."""
    bases = {id(t.base) for t in ins}
    staged = []
    for out, cur in zip(outs, ins):
        if out.base is not cur.base and id(out.base) in bases:
            tmp = ctx.temp(out.dtype, out.shape)
            copy(ctx, out, tmp)
            out = tmp
        staged.append(out)
    for out, cur in zip(staged, ins):
        copy(ctx, out, cur)


def _begin_loop(ctx, init: list[Tensor], bound: int) -> tuple[str, list[Tensor]]:
    """The iteration dim (sized at ``bound - 1``) and the carried values' tensors, filled before the loop."""
    lw = ctx._l
    it = f"__loop{sum(name.startswith('__loop') for name in lw.program.bounds)}_i"
    lw.program.bounds[it] = max(0, bound - 1)
    carried = [ctx.temp(t.dtype, t.shape) for t in init]
    for t, c in zip(init, carried):
        copy(ctx, t, c)
    return it, carried


@lowering("Loop")
def lower_loop(ctx) -> None:
    lw = ctx._l
    body = _graph(ctx, "body")
    trip_t = ctx.inputs[0] if ctx.has_input(0) else None
    cond_t = ctx.inputs[1] if ctx.has_input(1) else None
    init = [t for t in ctx.inputs[2:]]
    if any(is_nested(t) for t in init):
        return _unrolled_loop(ctx, body, trip_t, cond_t, init)
    trip, cond = scalar_spec(ctx, trip_t), scalar_spec(ctx, cond_t)
    static_trip = host_value(trip_t)
    bound = static_trip if isinstance(static_trip, int) else LOOP_BOUND
    it, carried = _begin_loop(ctx, init, bound)
    start = len(lw.program.steps)
    iter_num = lw.program.new_tensor("int64", (), sym=[D.Sym.name(it)])
    cond_in = lw.constant(np.array(True))
    outs = lw.lower_subgraph(body, [iter_num, cond_in, *carried])
    n = len(init)
    cond_out, carried_out, scans = outs[0], outs[1:1 + n], outs[1 + n:]
    cond_out_spec = scalar_spec(ctx, cond_out)
    always = {"dim": 1}
    if trip is None and cond in (None, always) and cond_out_spec == always:
        raise ctx.unsupported("a loop with no trip count whose condition is always true never ends")
    static_count = (isinstance(static_trip, int) and cond in (None, always) and cond_out_spec == always)
    count = static_trip if static_count else it[:-2] + "_n"
    if not static_count:
        lw.program.bounds[count] = bound
    count_dim = count if static_count else D.Sym.name(count)
    for j, s in enumerate(scans):
        out = ctx.output(n + j, s.dtype, (count_dim, *s.shape))
        _slice_kernel(ctx, "put", s, out, 1, s.numel, 1, D.Sym.name(it))
    unread = frozenset(j for j, v in enumerate(body.inputs[2:]) if not v.uses())
    reshaped = [body.inputs[2 + j].name for j in sorted(unread) if not _same(carried_out[j], carried[j])]
    if reshaped:  # after no iteration such a value would keep its initial type and shape, which no buffer has
        why = (f"the loop must run at least once: its carried value {reshaped[0]!r} takes the body's shape, not "
               f"its initial one")
        if not static_count:
            guard_scopes.record(lw, D.add(count_dim, -1), why)
        elif count < 1:
            raise ctx.unsupported(why)
    _end_loop(ctx, carried_out, carried, {"kind": "loop", "body": [start], "iter": it,
                                          "count": None if static_count else count, "trip": trip, "cond": cond,
                                          "cond_out": cond_out_spec, "bound": bound}, unread)
    for k, (v0, step) in json.loads(ctx.node.metadata_props.get(COUNTERS, "{}")).items():
        c = carried[int(k)]  # a counter (graph/passes/loop_counters.py): its final value is known at build time
        ctx.set_host(int(k), c.dtype, c.shape, [D.add(v0, D.mul(step, count_dim))] * int(D.product(c.shape)))


def _end_loop(ctx, carried_out: list[Tensor], carried: list[Tensor], entry: dict, unread: frozenset = frozenset()
              ) -> None:
    """The end of a loop body: carried values back into the next iteration's inputs; the loop's final values
    are those inputs; the control entry covers the body's steps. A carried value the body never reads (``unread``:
    Paddle carries a variable first assigned inside the loop, its initial value a placeholder scalar) may change
    type and shape: its tensor takes the body's output's (after no iteration it holds no value of the init's). One
    the body reads keeps its initial shape where the body gives as many elements in another ([] and [1])."""
    carried = list(carried)
    for j in unread:
        if not _same(carried_out[j], carried[j]):
            carried[j] = ctx.temp(carried_out[j].dtype, carried_out[j].shape)
    for c, t in zip(carried_out, carried):
        if not _same(c, t) and not _fits([c], [t]):  # (the same elements, up to axes of 1: [] and [1])
            raise ctx.unsupported(f"a loop-carried value changes type or shape between iterations: {t.dtype}"
                                  f"{[D.to_text(d) for d in t.shape]} -> {c.dtype}{[D.to_text(d) for d in c.shape]}")
    _carry_back(ctx, carried_out, carried)
    for i, c in enumerate(carried):
        ctx._set(i, c)
    entry["body"].append(len(ctx._l.program.steps))
    ctx._l.program.control.append(entry)


def _unrolled_loop(ctx, body, trip_t, cond_t, init) -> None:
    """A loop that carries sequences (lists known at build time) is unrolled while lowering: its trip count
    and conditions must be known at build time, at most UNROLL_MAX iterations."""
    lw = ctx._l
    trip, go = host_value(trip_t), host_value(cond_t) if cond_t is not None else 1
    if not isinstance(trip, int) or not isinstance(go, int) or trip > UNROLL_MAX:
        raise ctx.unsupported(f"a loop carrying a sequence needs a trip count (at most {UNROLL_MAX}) and "
                              "condition known at build time")
    n, carried, scans = len(init), list(init), []
    for t in range(trip):
        if not go:
            break
        outs = lw.lower_subgraph(body, [lw.constant(np.array(t, np.int64)), lw.constant(np.array(True)), *carried],
                                 conditional=False)
        go = host_value(outs[0])
        if not isinstance(go, int):
            raise ctx.unsupported("a loop carrying a sequence needs a condition known at build time")
        carried = outs[1:1 + n]
        scans.append(outs[1 + n:])
    for i, c in enumerate(carried):
        ctx._set(i, c)
    for j in range(len(body.outputs) - 1 - n):
        if not scans:
            raise ctx.unsupported("an unrolled loop that runs no iteration has scan outputs of unknown shape")
        ctx._set(n + j, stack(ctx, [s[j] for s in scans]))


def _axes(ctx, name: str, count: int, ranks: list[int]) -> list[int]:
    vals = ctx.attr(name) or [0] * count
    return [normalize_axis(a, r, name) for a, r in zip(vals, ranks)]


@lowering("Scan")
def lower_scan(ctx) -> None:
    lw = ctx._l
    if ctx.opset < 9:
        raise ctx.unsupported("Scan before opset 9 (batched, with sequence_lens) is not supported")
    body = _graph(ctx, "body")
    m = int(ctx.attr("num_scan_inputs"))
    inputs = list(ctx.inputs)
    n = len(inputs) - m
    states, scans = inputs[:n], inputs[n:]
    in_axes = _axes(ctx, "scan_input_axes", m, [t.rank for t in scans])
    in_dirs = ctx.attr("scan_input_directions") or [0] * m
    length = scans[0].shape[in_axes[0]]
    for t, a in zip(scans, in_axes):
        if isinstance(t.shape[a], int) and isinstance(length, int) and t.shape[a] != length:
            raise ctx.unsupported("scan inputs differ in length")
    bound = length if isinstance(length, int) else LOOP_BOUND
    it, carried = _begin_loop(ctx, states, bound)
    start = len(lw.program.steps)
    step = D.Sym.name(it)
    back = D.add(D.add(length, -1), D.mul(step, -1))
    slices = []
    for t, a, d in zip(scans, in_axes, in_dirs):
        sl = ctx.temp(t.dtype, tuple(t.shape[:a]) + tuple(t.shape[a + 1:]))
        _slice_kernel(ctx, "take", t, sl, D.product(t.shape[:a]), D.product(t.shape[a + 1:]), length,
                      back if d else step)
        slices.append(sl)
    outs = lw.lower_subgraph(body, [*carried, *slices])
    carried_out, scan_outs = outs[:n], outs[n:]
    out_axes = _axes(ctx, "scan_output_axes", len(scan_outs), [t.rank + 1 for t in scan_outs])
    out_dirs = ctx.attr("scan_output_directions") or [0] * len(scan_outs)
    for j, (s, a, d) in enumerate(zip(scan_outs, out_axes, out_dirs)):
        out = ctx.output(n + j, s.dtype, tuple(s.shape[:a]) + (length,) + tuple(s.shape[a:]))
        _slice_kernel(ctx, "put", s, out, D.product(s.shape[:a]), D.product(s.shape[a:]), length,
                      back if d else step)
    _end_loop(ctx, carried_out, carried, {"kind": "loop", "body": [start], "iter": it, "count": None,
                                          "trip": {"dim": D.to_json(length)}, "cond": None, "cond_out": None,
                                          "bound": bound})
