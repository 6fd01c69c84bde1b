"""The quantized matmul's step for a few rows (a speculative verification's k + 1, llm/speculative.py).

The prefill GEMM's register tile (the software classes' ``quant_gemm``) dequantizes each weight again for each
group of its rows, and its row groups past a few rows idle; a decode GEMV per row would read the weights
k + 1 times. This step (quant_matmul.wgsl.j2 ``rows``) dequantizes each weight once, to f32, and applies it to
all FEW_ROWS rows (rows past M repeat row M - 1: 2..8 rows cost the same). lavapipe, SmolLM2-135M int4,
software-subgroups, an 8-row step at 200 past positions (GPU timestamps, same process, loaded machine): the
matmuls 400 -> 140 ms against 56-68 ms for a 1-row step; with the few-rows attention (cached_attention.py) the
whole step 5.3-8.8x a 1-row step -> 2.2-2.4x. What was slow: x. Every lane of the GEMM's tile and of this step
reads the same x values, which a software GPU loads lane by lane (non-constant addresses): with x shared in
subgroups (``sgx``: a lane loads a vec4 of each row's block, broadcasts hand them round) the step ran 352 ->
196 ms. A split-K variant (a workgroup's lanes on different blocks, partial sums through workgroup memory: no
load repeated) ran 390-540 ms there, not kept. Weights of int4/int8 only (ours: graph/quantize.py); rows past
FEW_ROWS take the GEMM.
"""

from __future__ import annotations

from ... import dims as D

FEW_ROWS = 8
# Columns an invocation: with x shared in subgroups (software-subgroups) 8 (8-row step 197 -> 183 ms against 4;
# 2: 232 ms); without, 4 (each lane loads x itself, so more columns amortize it but lengthen the shader).
FEW_ROWS_TN, FEW_ROWS_TN_PLAIN = 8, 4
FEW_ROWS_FORMATS = ("int4", "int8")
WG = 8  # one SIMD group of llvmpipe's, as the GEMV's


def only_when(groups, positive):
    """``groups`` workgroups where ``positive`` > 0, else none (a grid of 0 skips the step)."""
    return D.dmin(groups, D.mul(D.dmax(positive, 0), 1 << 20))


def few_rows_step(ctx, reads: dict, out, rows, when, common: dict, sizes: dict, sgx: bool):
    """Emit the step for 2..FEW_ROWS rows; returns the factor that empties the GEMM's grid at those rows."""
    tn = FEW_ROWS_TN if sgx else FEW_ROWS_TN_PLAIN
    groups = only_when(D.ceildiv(common["N"], tn * WG), D.add(FEW_ROWS + 1, D.mul(rows, -1)))
    ctx.dispatch("quant_matmul.wgsl.j2", reads, {"out": out}, grid=(groups, 1, 1), wg=WG, when=when,
                 params={"M": rows, **sizes}, kind="rows", tn=tn, R=FEW_ROWS, sgx=sgx, **common)
    return D.add(rows, -FEW_ROWS)
