"""`webinfer build`'s flag for the CPU path's model weights (graph/cpu_weights.py)."""

from __future__ import annotations


def add_build_flags(b) -> None:
    b.add_argument("--cpu-weights", choices=["f32", "f16", "int4"],
                   help="how the CPU model (--cpu) stores its weights: int4 (onnxruntime MatMulNBits and "
                        "GatherBlockQuantized, blocks of 32 with zero points), f16 (float16, computed in float32) "
                        "or f32; default: int4 with --quantize int4, f16 with --quantize f16, else f32")
