"""Graph passes on onnx-ir, run in place by ``graph/optimize.py`` before lowering.

Each module has ``run(model) -> int`` (nodes removed or rewritten). Generic jobs come from the
libraries that already do them well: constant folding from onnxscript's optimizer; dead code, common
subexpressions and Identity nodes from onnx-ir's common passes. The pair cancellations, Conv+BN
folding, MatMul+Add -> Gemm and the fusions are ours, written as rules (``rules.py``: pattern, condition,
replacement, each rule tested alone), so their conditions (lossless casts, constant weights, broadcasting)
are explicit.
"""

from __future__ import annotations

from . import (
    absorb_norms,
    cancel,
    conv_bn,
    cse,
    dce,
    fold_constants,
    fold_shapes,
    fuse_activations,
    fuse_attention,
    fuse_elementwise,
    fuse_epilogue,
    fuse_norms,
    fuse_softmax_topk,
    identity,
    loop_counters,
    matmul_gemm,
    pair_matmuls,
    reorder,
    sink_transposes,
    split_input_dims,
    unflatten_matmuls,
)

# Order matters a little: folding first exposes constants; identity/cse before the pair rules expose
# adjacent pairs. Model-specific rewrites that the build asks for (the LLM's KV cache and attention,
# see graph/optimize.py) run between the clean-up and the fusions, so that they match the exporter's
# spelling before elementwise chains are merged; dce last sweeps whatever the others left unused.
CLEANUP = {
    "split_input_dims": split_input_dims.run,  # first: before any pass bakes a shared name's equality in
    "fold_constants": fold_constants.run,
    "fold_shapes": fold_shapes.run,
    "loop_counters": loop_counters.run,  # a Loop-carried counter: an expression of the iteration dim
    "identity": identity.run,
    "cse": cse.run,
    "sink_transposes": sink_transposes.run,  # below row-local ops (a q/k norm), towards what reads the layout
    "cancel": cancel.run,
    "conv_bn": conv_bn.run,
    "unflatten_matmuls": unflatten_matmuls.run,  # view -> Gemm -> view: one MatMul over the leading dims
    "matmul_gemm": matmul_gemm.run,
    "reorder": reorder.run,
}
# Fusions (see docs/architecture.md, "Fusions"): norms and activations are recognised first (their
# primitives are elementwise too), then elementwise chains, so that an epilogue arrives as one program
# that the matmul/conv pass can take whole.
FUSIONS: dict = {
    "fuse_attention": fuse_attention.run,  # before its scale/mask steps join elementwise programs
    "fuse_norms": fuse_norms.run,
    "fuse_softmax_topk": fuse_softmax_topk.run,
    "fuse_activations": fuse_activations.run,
    "fuse_elementwise": fuse_elementwise.run,
    "fuse_epilogue": fuse_epilogue.run,
    "pair_matmuls": pair_matmuls.run,  # a gated MLP's two projections: one decode GEMV
    "absorb_norms": absorb_norms.run,  # after the epilogues: the norm joins FusedMatMulQ as well
}
FINAL = {"dce": dce.run}
PASSES = {**CLEANUP, **FUSIONS, **FINAL}
