"""The generation head: logits of the last position only, and the next token sampled on the GPU.

A decoder's ``logits`` output is [batch, sequence, vocab]; generation needs only the last row, so the
LM-head MatMul is fed the last position alone (a prefill of 128 tokens then skips 127 rows x 49152 x 576
multiply-adds). A ``webinfer.SampleToken`` node after it picks the next token (greedy, temperature,
top-k, top-p, repetition penalty; seeded), so a decode step reads back 4 bytes instead of the logits.

New graph inputs, written by the generator each step:
  sampling_params  float32 [4]       temperature (0 = greedy), top_k (0 = off), top_p (1 = off), repetition penalty
  sampling_seed    uint32  [2]       seed, step (the random stream is a hash of both)
  penalty_ids      int32   [max_seq] ids the repetition penalty applies to, -1 padded
  token_mask       uint32  [ceil(vocab / 32)] bit i % 32 of word i // 32 allows token i (all ones: no
                   constraint); constrained decoding (llm/constrain) writes the allowed-token set here, so
                   disallowed logits become -inf inside the sampler and logits are never read back.
                   Artifacts built before it have no such input: the generator then refuses constraints.
New output ``next_token`` int32 [1].
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ..passes._util import const, new_initializer

DOMAIN = "webinfer"
LOGITS = "logits"
INT64_MAX = np.iinfo(np.int64).max


class HeadError(ValueError):
    """The model's logits are not produced the way this rewrite expects."""


def graph_output(graph: ir.Graph, name: str) -> ir.Value | None:
    return next((v for v in graph.outputs if v.name == name), None)


def last_token_logits(model: ir.Model) -> int:
    """Feed the LM head only the last position: logits become [batch, 1, vocab]."""
    graph = model.graph
    logits = graph_output(graph, LOGITS)
    if logits is None:
        raise HeadError("the model has no 'logits' output")
    head, chain = head_matmul(logits)
    if head is None or head.inputs[0].shape is None or len(head.inputs[0].shape) != 3:
        raise HeadError("'logits' must come from a MatMul over [batch, sequence, hidden] (then at most "
                        "elementwise ops with constants, such as Gemma 2's final soft-cap)")
    hidden = head.inputs[0]
    starts = new_initializer(graph, np.array([-1], np.int64), "last_token_start")
    ends = new_initializer(graph, np.array([INT64_MAX], np.int64), "last_token_end")
    axes = new_initializer(graph, np.array([1], np.int64), "last_token_axis")
    sl = ir.Node("", "Slice", [hidden, starts, ends, axes], name="last_token", num_outputs=1)
    graph.insert_before(head, sl)
    b, _, h = hidden.shape
    sl.outputs[0].dtype, sl.outputs[0].shape = hidden.dtype, ir.Shape([b, 1, h])
    head.replace_input_with(0, sl.outputs[0])
    for v in [head.outputs[0], *chain]:  # the rows are independent: every value after the MatMul has one
        v.shape = ir.Shape([v.shape[0], 1, v.shape[2]]) if v.shape is not None and len(v.shape) == 3 else None
    return 1


_ROWWISE = {"Mul", "Div", "Add", "Sub", "Tanh", "Cast", "Identity"}


def head_matmul(logits: ir.Value) -> tuple[ir.Node | None, list[ir.Value]]:
    """The LM-head MatMul under ``logits`` and the values between them (elementwise ops whose other inputs
    are constants, e.g. ``30 * tanh(x / 30)``), or (None, [])."""
    chain, value = [], logits
    for _ in range(8):
        node = value.producer()
        if node is not None and (node.domain, node.op_type) == (DOMAIN, "MatMulQ"):  # a quantized head
            return node, chain
        if node is None or node.domain not in ("", "ai.onnx"):
            return None, []
        if node.op_type == "MatMul":
            return node, chain
        if node.op_type not in _ROWWISE:
            return None, []
        data = [v for v in node.inputs if v is not None and const(v) is None]
        if len(data) != 1 or any(const(v) is not None and not _per_column(const(v)) for v in node.inputs
                                 if v is not None):
            return None, []
        chain.append(value)
        value = data[0]
    return None, []


def _per_column(c: np.ndarray) -> bool:
    """A constant the same for every row (a scalar, or a bias along the vocabulary such as Marian's
    final_logits_bias): the op stays independent per position."""
    return c.size == 1 or (c.ndim >= 1 and all(d == 1 for d in c.shape[:-1]))


def sample_token(model: ir.Model, max_seq: int) -> int:
    """Append ``next_token = webinfer.SampleToken(logits, sampling_params, sampling_seed, penalty_ids,
    token_mask)``."""
    graph = model.graph
    logits = graph_output(graph, LOGITS)
    if logits is None:
        raise HeadError("the model has no 'logits' output")
    vocab = logits.shape[-1] if logits.shape is not None and len(logits.shape) else None
    if not isinstance(vocab, int):
        raise HeadError("the vocabulary size (the last dim of 'logits') must be fixed")
    inputs = [
        ir.Value(name="sampling_params", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([4])),
        ir.Value(name="sampling_seed", type=ir.TensorType(ir.DataType.UINT32), shape=ir.Shape([2])),
        ir.Value(name="penalty_ids", type=ir.TensorType(ir.DataType.INT32), shape=ir.Shape([max_seq])),
        ir.Value(name="token_mask", type=ir.TensorType(ir.DataType.UINT32), shape=ir.Shape([(vocab + 31) // 32])),
    ]
    graph.inputs.extend(inputs)
    node = ir.Node(DOMAIN, "SampleToken", [logits, *inputs], name="sample_token", num_outputs=1)
    graph.append(node)
    out = node.outputs[0]
    out.name, out.dtype, out.shape = "next_token", ir.DataType.INT32, ir.Shape([1])
    graph.outputs.append(out)
    if DOMAIN not in model.opset_imports:
        model.opset_imports[DOMAIN] = 1
    return 1
