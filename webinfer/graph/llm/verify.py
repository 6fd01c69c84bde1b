"""The verification head for speculative decoding: logits of the last ``verify_rows`` positions, and the
target's verdict on a draft computed on the GPU.

A plain step (prefill or decode) needs the last position's logits only; a verification step feeds the
last accepted token followed by k draft tokens and needs the target's choice at every one of those k + 1
positions. So the LM head is fed the last V rows of the hidden states, V being the length of the new input
``verify_ids`` (1 on a plain step: the head costs what ``head.last_token_logits`` made it cost; k + 1 on a
verification step). ``SampleToken`` still samples the last row. ``webinfer.VerifyDraft`` walks the rows and
decides how many draft tokens the target accepts (greedy: equal to the argmax; sampling: the standard
speculative-sampling rule for a deterministic proposal, codegen/kernels/verify.py), so a verification step
reads back 8 bytes.

New graph input ``verify_ids`` int32 [verify_rows]: the draft tokens (row i is checked against
verify_ids[i]); its last entry is unused (the bonus row). New output ``verify_result`` int32 [2]: the
number of accepted draft tokens n, then the target's token at row n (the correction, or the bonus token
when every draft token was accepted).
"""

from __future__ import annotations

import onnx_ir as ir

from .head import DOMAIN, LOGITS, HeadError, graph_output, head_matmul

VERIFY_ROWS = "verify_rows"


def last_rows_logits(model: ir.Model) -> int:
    """Feed the LM head the last ``verify_rows`` positions: logits become [batch, verify_rows, vocab]."""
    graph = model.graph
    logits = graph_output(graph, LOGITS)
    if logits is None:
        raise HeadError("the model has no 'logits' output")
    head, chain = head_matmul(logits)
    if head is None or head.inputs[0].shape is None or len(head.inputs[0].shape) != 3:
        raise HeadError("'logits' must come from a MatMul over [batch, sequence, hidden] (then at most "
                        "elementwise ops with constants, such as Gemma 2's final soft-cap)")
    hidden = head.inputs[0]
    rows = ir.Value(name="verify_ids", type=ir.TensorType(ir.DataType.INT32), shape=ir.Shape([VERIFY_ROWS]))
    graph.inputs.append(rows)
    node = ir.Node(DOMAIN, "LastRows", [hidden, rows], name="last_rows", num_outputs=1)
    graph.insert_before(head, node)
    b, _, h = hidden.shape
    node.outputs[0].dtype, node.outputs[0].shape = hidden.dtype, ir.Shape([b, VERIFY_ROWS, h])
    head.replace_input_with(0, node.outputs[0])
    for v in [head.outputs[0], *chain]:  # the rows are independent: every value after the MatMul has V
        v.shape = ir.Shape([v.shape[0], VERIFY_ROWS, v.shape[2]]) if v.shape is not None and len(v.shape) == 3 else None
    if DOMAIN not in model.opset_imports:
        model.opset_imports[DOMAIN] = 1
    return 1


def verify_draft(model: ir.Model) -> int:
    """Append ``verify_result = webinfer.VerifyDraft(logits, verify_ids, sampling_params, sampling_seed)``
    (after ``head.sample_token``, whose inputs it shares)."""
    graph = model.graph
    logits = graph_output(graph, LOGITS)
    named = {v.name: v for v in graph.inputs}
    if logits is None or any(n not in named for n in ("verify_ids", "sampling_params", "sampling_seed")):
        raise HeadError("the verification head needs the last-rows logits and the sampling inputs")
    node = ir.Node(DOMAIN, "VerifyDraft", [logits, named["verify_ids"], named["sampling_params"],
                                          named["sampling_seed"]], name="verify_draft", num_outputs=1)
    graph.append(node)
    out = node.outputs[0]
    out.name, out.dtype, out.shape = "verify_result", ir.DataType.INT32, ir.Shape([2])
    graph.outputs.append(out)
    return 1
