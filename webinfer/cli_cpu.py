"""`webinfer build`'s flag for the CPU path's model weights (graph/cpu_weights.py)."""

from __future__ import annotations


def add_build_flags(b) -> None:
    b.add_argument("--cpu-weights", choices=["f32", "f16", "int8", "int4"],
                   help="how the CPU model (--cpu) stores its weights, each turned back into float32 when "
                        "onnxruntime makes the session (a smaller download): int4 or int8 (DequantizeLinear blocks "
                        "of 32 with zero points; int4 keeps embedding tables at 8 bits), f16 (float16) or f32; "
                        "default: as --quantize where it is one of those, else f32")
