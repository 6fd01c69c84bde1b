"""RNN, GRU, LSTM with the default activations: one kernel per (timestep, direction).

The state (h, and c for LSTM) lives in two ping-pong buffers of [directions, 2, batch, hidden]; a step
reads one and writes the other plus its slice of Y. One invocation per (batch, hidden unit) computes
its gates with dot products over the input and the previous h (GRU recomputes the reset gate of every
unit it needs when linear_before_reset is 0).
"""

from __future__ import annotations

import numpy as np

from ..registry import lowering

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _opt(ctx, i, shape, dtype):
    if ctx.has_input(i):
        return ctx.gpu(ctx.inputs[i])
    return ctx._l.constant(np.zeros(shape, dtype=np.float32))


@lowering("RNN", "GRU", "LSTM")
def lower_recurrent(ctx) -> None:
    x, w = ctx.inputs[0], ctx.inputs[1]
    if ctx.attr("activations") is not None or ctx.attr("clip") is not None:
        raise ctx.unsupported("only the default activations, without clip")
    if ctx.has_input(4):
        raise ctx.unsupported("sequence_lens is not supported")
    if ctx.attr("direction", "forward") != "forward":
        raise ctx.unsupported("only direction=forward is verified (reverse/bidirectional disagree with the reference)")
    layout = int(ctx.attr("layout", 0))
    t_len, b_len, i_len = (x.shape[1], x.shape[0], x.shape[2]) if layout else x.shape
    hid = int(ctx.attr("hidden_size"))
    dirs = 2 if ctx.attr("direction", "forward") == "bidirectional" else 1
    if not all(isinstance(d, int) for d in (t_len, b_len, i_len)):
        raise ctx.unsupported("sequence, batch and input sizes must be fixed")
    g = GATES[ctx.op]
    state = [ctx.temp("float32", (dirs, 2, b_len, hid)) for _ in range(2)]
    y_shape = (b_len, t_len, dirs, hid) if layout else (t_len, dirs, b_len, hid)
    named = [i < len(ctx.node.outputs) and bool(ctx.node.outputs[i].name) for i in range(3)]
    y = ctx.output(0, x.dtype, y_shape) if named[0] else ctx.temp(x.dtype, y_shape)
    common = {"b": b_len, "h": hid, "i": i_len, "t": t_len, "dirs": dirs}
    init_reads = {"h0": _opt(ctx, 5, (dirs, b_len, hid), None), "c0": _opt(ctx, 6, (dirs, b_len, hid), None)}
    n_state = dirs * b_len * hid
    tv = {"layout": layout, "op": ctx.op, "lbr": int(ctx.attr("linear_before_reset", 0)), "g": g}
    ctx.dispatch("recurrent.wgsl.j2", init_reads, {"s_out": state[0]}, work=n_state,
                 params={"n": n_state, **common}, kind="init", **tv)
    weights = {"x": ctx.gpu(x), "w": ctx.gpu(w), "r": ctx.gpu(ctx.inputs[2]),
               "bias": _opt(ctx, 3, (dirs, 2 * g * hid), None), "peep": _opt(ctx, 7, (dirs, 3 * hid), None)}
    reverse = ctx.attr("direction", "forward") == "reverse"
    for step in range(t_len):
        for d in range(dirs):
            t = t_len - 1 - step if (reverse or d == 1) else step
            src, dst = state[step % 2], state[(step + 1) % 2]
            ctx.dispatch("recurrent.wgsl.j2", {**weights, "s_in": src}, {"s_out": dst, "y": y},
                         work=b_len * hid, params={"n": b_len * hid, "ts": t, "d": d, **common}, kind="step", **tv)
    final = state[t_len % 2]
    for k in (1, 2):
        if named[k]:
            out = ctx.output(k, x.dtype, (b_len, dirs, hid) if layout else (dirs, b_len, hid))
            ctx.dispatch("recurrent.wgsl.j2", {"s_in": final}, {"out": out}, work=n_state,
                         params={"n": n_state, "k": k - 1, **common}, kind="final", **tv)
