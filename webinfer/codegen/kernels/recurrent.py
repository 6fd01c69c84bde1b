"""RNN, GRU, LSTM: one kernel per (timestep, direction).

The state (h, and c for LSTM) lives in two ping-pong buffers of [directions, 2, batch, hidden]; a step
reads one and writes the other plus its slice of Y. A fixed sequence length is unrolled (one command buffer);
a symbolic one (batch too may be symbolic) is a runtime loop, as Scan's (kernels/control_flow.py): per
iteration the step kernels of both directions at t = the loop's index dim (T-1 minus it, backwards), then a
copy of the new state over the old. One invocation per (batch, hidden unit) computes
its gates with dot products over the input and the previous h (GRU with linear_before_reset=0 first writes
r * h(t-1) of every unit in a kernel of its own, since each unit's candidate reads all of them). Both directions of a bidirectional net run in the same
ping-pong step (each writes its own half of the state); the reverse one walks t from the end. With
``sequence_lens`` a batch row past its length keeps its state and writes zeros to Y (onnxruntime's
semantics: Y_h is the state after the row's last valid step, in either direction).
"""

from __future__ import annotations

import numpy as np

from ... import dims as D
from ...opschema import WEBINFER_DOMAIN
from ..registry import lowering
from .control_flow import LOOP_BOUND, copy
from .loop_limit import check_loop

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DEFAULT_ACTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
# Activation name -> (WGSL body over x with {a}/{b} for alpha/beta, default alpha, default beta); alpha/beta
# are consumed from activation_alpha/activation_beta, in order, by the activations that take them.
ACTIVATIONS = {
    "Sigmoid": ("return sig(x);", None, None),
    "Tanh": ("return th(x);", None, None),
    "Relu": ("return max(x, 0.0);", None, None),
    "HardSigmoid": ("return clamp({a} * x + {b}, 0.0, 1.0);", 0.2, 0.5),
    "LeakyRelu": ("return select({a} * x, x, x >= 0.0);", 0.01, None),
    "ThresholdedRelu": ("return select(0.0, x, x > {a});", 1.0, None),
    "ScaledTanh": ("return {a} * th({b} * x);", 1.0, 1.0),
    "Affine": ("return {a} * x + {b};", 1.0, 0.0),
    "Elu": ("return select({a} * (exp(x) - 1.0), x, x >= 0.0);", 1.0, None),
    "Softsign": ("return x / (1.0 + abs(x));", None, None),
    "Softplus": ("return max(x, 0.0) + log(1.0 + exp(-abs(x)));", None, None),
}


def _opt(ctx, i, shape):
    if ctx.has_input(i):
        return ctx.gpu(ctx.inputs[i])
    return ctx._l.constant(np.zeros(shape, dtype=np.float32))


def _f32(v: float) -> str:
    return f"{float(np.float32(v))!r}"


def _activations(ctx, dirs: int) -> list[list[str]]:
    """Per direction, the WGSL bodies of f, g (and h): names looked up in our table, never pasted."""
    names = ctx.attr("activations")
    per = len(DEFAULT_ACTS[ctx.op])
    if names is None:
        names = DEFAULT_ACTS[ctx.op] * dirs
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in names]
    if len(names) == per and dirs == 2:
        names = names * 2
    if len(names) != per * dirs:
        raise ctx.unsupported(f"expected {per * dirs} activations, got {len(names)}")
    alphas = list(ctx.attr("activation_alpha") or [])
    betas = list(ctx.attr("activation_beta") or [])
    bodies = []
    for name in names:
        if name not in ACTIVATIONS:
            raise ctx.unsupported("unsupported activation (supported: " + ", ".join(ACTIVATIONS) + ")")
        body, a, b = ACTIVATIONS[name]
        a = alphas.pop(0) if a is not None and alphas else a
        b = betas.pop(0) if b is not None and betas else b
        bodies.append(body.format(a=_f32(a or 0.0), b=_f32(b or 0.0)))
    return [bodies[d * per:(d + 1) * per] for d in range(dirs)]


@lowering("LSTM", domain=WEBINFER_DOMAIN)
def lower_quantized_lstm(ctx) -> None:
    """ONNX's LSTM whose H(t-1) is rounded to uint8 per step (``quantize_hidden``, graph/contrib/recurrent.py)."""
    if ctx.has_input(4):
        raise ctx.unsupported("sequence_lens is not supported with quantize_hidden")
    lower_recurrent(ctx, quantize_hidden=bool(int(ctx.attr("quantize_hidden", 0))))


@lowering("RNN", "GRU", "LSTM")
def lower_recurrent(ctx, quantize_hidden: bool = False) -> None:
    x, w = ctx.inputs[0], ctx.inputs[1]
    direction = ctx.attr("direction", "forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    if direction not in ("forward", "reverse", "bidirectional"):
        raise ctx.unsupported("direction must be forward, reverse or bidirectional")
    if ctx.op == "LSTM" and int(ctx.attr("input_forget", 0)):
        raise ctx.unsupported("input_forget=1 is not supported")
    layout = int(ctx.attr("layout", 0))
    if len(x.shape) != 3:
        raise ctx.unsupported(f"X must have rank 3, got shape {tuple(x.shape)}")
    t_len, b_len, i_len = (x.shape[1], x.shape[0], x.shape[2]) if layout else x.shape
    hid = int(ctx.attr("hidden_size"))
    dirs = 2 if direction == "bidirectional" else 1
    if not isinstance(i_len, int):
        i_len = w.shape[2]
    if not isinstance(i_len, int):
        raise ctx.unsupported("the input size must be fixed")
    g = GATES[ctx.op]
    acts = _activations(ctx, dirs)
    clip = ctx.attr("clip")
    lens = ctx.has_input(4)  # kept after the state (as f32): one binding fewer per step
    state = [ctx.temp("float32", (D.add(D.mul(dirs * 2 * hid, b_len), b_len if lens else 0),)) for _ in range(2)]
    y_shape = (b_len, t_len, dirs, hid) if layout else (t_len, dirs, b_len, hid)
    named = [i < len(ctx.node.outputs) and bool(ctx.node.outputs[i].name) for i in range(3)]
    y = ctx.output(0, x.dtype, y_shape) if named[0] else ctx.temp(x.dtype, y_shape)
    common = {"b": b_len, "h": hid, "i": i_len, "t": t_len, "dirs": dirs}
    for count, what in ((i_len, "the input size"), (hid, "the hidden size"), (D.mul(b_len, hid), "batch x hidden")):
        check_loop(ctx, count, what)
    init_reads = {name: ctx.gpu(ctx.inputs[i]) for i, name in ((5, "h0"), (6, "c0")) if ctx.has_input(i)}
    n_state = D.mul(dirs * hid, b_len)
    tv = {"layout": layout, "op": ctx.op, "lbr": int(ctx.attr("linear_before_reset", 0)), "g": g,
          "clip": None if clip is None else _f32(abs(float(clip))), "lens": lens, "qh": quantize_hidden}
    if lens:
        init_reads["lens"] = ctx.gpu(ctx.inputs[4])
    init_writes = {"s_out": state[0], "s_alt": state[1]} if lens else {"s_out": state[0]}
    ctx.dispatch("recurrent.wgsl.j2", init_reads, init_writes, work=n_state,
                 params={"n": n_state, **common}, kind="init", h0="h0" in init_reads, c0="c0" in init_reads, **tv)
    weights = {"x": ctx.gpu(x), "w": ctx.gpu(w), "r": ctx.gpu(ctx.inputs[2]),
               "bias": _opt(ctx, 3, (dirs, 2 * g * hid))}
    if ctx.op == "LSTM":
        weights["peep"] = _opt(ctx, 7, (dirs, 3 * hid))

    rh = ctx.temp("float32", (dirs, b_len, hid)) if ctx.op == "GRU" and not tv["lbr"] else None

    def steps(step, src, dst):
        for d in range(dirs):
            t = D.add(D.add(t_len, -1), D.mul(step, -1)) if (direction == "reverse" or d == 1) else step
            params = {"n": D.mul(b_len, hid), "ts": t, "d": d, **common}
            reads = {**weights, "s_in": src}
            if rh is not None:  # r * H(t-1) of all units first: each unit's candidate reads all of them
                ctx.dispatch("recurrent.wgsl.j2", reads, {"rh": rh}, work=D.mul(b_len, hid), params=params,
                             kind="reset", acts=acts[d], **tv)
                reads["rh"] = rh
            ctx.dispatch("recurrent.wgsl.j2", reads, {"s_out": dst, "y": y}, work=D.mul(b_len, hid), params=params,
                         kind="step", acts=acts[d], **tv)

    if isinstance(t_len, int):
        for step in range(t_len):
            steps(step, state[step % 2], state[(step + 1) % 2])
        final = state[t_len % 2]
    else:
        final = _time_loop(ctx, t_len, steps, state)
    for k in (1, 2):
        if named[k]:
            out = ctx.output(k, x.dtype, (b_len, dirs, hid) if layout else (dirs, b_len, hid))
            ctx.dispatch("recurrent.wgsl.j2", {"s_in": final}, {"out": out}, work=n_state,
                         params={"n": n_state, "k": k - 1, **common}, kind="final", **tv)


def _time_loop(ctx, t_len, steps, state) -> object:
    """A symbolic sequence length: the steps as the body of a runtime loop over t (its index dim), the new
    state copied over the old at the end of each iteration. Returns the final state's buffer."""
    program = ctx._l.program
    it = f"__loop{sum(name.startswith('__loop') for name in program.bounds)}_i"
    program.bounds[it] = LOOP_BOUND - 1
    start = len(program.steps)
    steps(D.Sym.name(it), state[0], state[1])
    copy(ctx, state[1], state[0])
    ctx.assume(D.add(LOOP_BOUND, D.mul(t_len, -1)), f"at most {LOOP_BOUND} timesteps")
    program.control.append({"kind": "loop", "body": [start, len(program.steps)], "iter": it, "count": None,
                            "trip": {"dim": D.to_json(t_len)}, "cond": None, "cond_out": None, "bound": LOOP_BOUND})
    return state[0]
