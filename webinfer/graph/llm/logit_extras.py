"""OpenAI's ``logit_bias`` and ``logprobs`` for generation artifacts, on the GPU (after head.sample_token).

- ``logit_bias`` float32 [vocab]: a new input added to the last position's logits before SampleToken (a plain
  Add), so greedy, temperature, top-k/top-p and any token mask all see the biased scores. The generator
  writes zeros unless a request sets a bias.
- ``logprobs_k`` uint32 [1] and the output ``token_logprobs`` float32 [1 + 2 * 20]: webinfer.TokenLogprobs
  (codegen/kernels/logprobs.py) over the biased logits and the sampled token: the token's log-probability
  (a log-softmax at temperature 1) and the ``k`` most likely tokens' (values, then ids). With k = 0xffffffff
  (the generator's default) the kernel returns at once.
Only the few floats of ``token_logprobs`` are read back, and only when a request asks for logprobs.
"""

from __future__ import annotations

import onnx_ir as ir

DOMAIN = "webinfer"


def run(model: ir.Model) -> int:
    graph = model.graph
    sample = next((n for n in graph if (n.domain, n.op_type) == (DOMAIN, "SampleToken")), None)
    if sample is None:
        return 0
    logits = sample.inputs[0]
    vocab = logits.shape[-1] if logits.shape is not None else None
    if not isinstance(vocab, int):
        return 0
    bias = ir.Value(name="logit_bias", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([vocab]))
    k = ir.Value(name="logprobs_k", type=ir.TensorType(ir.DataType.UINT32), shape=ir.Shape([1]))
    graph.inputs.extend([bias, k])
    add = ir.Node("", "Add", [logits, bias], name="logit_bias_add", num_outputs=1)
    add.outputs[0].dtype, add.outputs[0].shape = logits.dtype, logits.shape
    graph.insert_before(sample, add)
    sample.replace_input_with(0, add.outputs[0])
    lp = ir.Node(DOMAIN, "TokenLogprobs", [add.outputs[0], sample.outputs[0], k], name="token_logprobs",
                 num_outputs=1)
    graph.append(lp)
    out = lp.outputs[0]
    out.name, out.dtype, out.shape = "token_logprobs", ir.DataType.FLOAT, ir.Shape([41])
    graph.outputs.append(out)
    return 1
