"""Decode-shaped matrix-vector kernels: GB/s of weight streamed, beside a plain copy kernel on the same device.

    python benchmarks/gemv_bandwidth.py [--repeat 50]

Each case builds a one-MatMul model ``[1, K] @ W[K, N]`` (fp32 K-major, fp32-nk: a transposed table as
a tied LM head has, or rewritten to int8/int4 by the quantize pass), takes the artifact's single GEMV step and dispatches it ``repeat`` times in one command
buffer. GB/s counts the weight bytes the kernel reads (words + block params). The copy kernel's bytes
are those read plus those written, over a buffer the size of the fp32 weight.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

COPY_WGSL = """@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = g.y * nwg.x * 64u + g.x;
  if (i < arrayLength(&src)) { dst[i] = src[i]; }
}
"""


def build_case(k: int, n: int, fmt: str | None, out_dir: str) -> None:
    import onnx
    import onnx_ir as ir
    from onnx import TensorProto, helper

    from webinfer.build import build
    from webinfer.graph.quantize import quantize_weights

    w = np.random.default_rng(0).normal(size=(k, n)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
    if fmt == "fp32-nk":  # a tied LM head: MatMul(x, Transpose(table)) runs on the N-major table
        w = np.ascontiguousarray(w.T)
        nodes.insert(0, helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]))
        nodes[1].input[1] = "wt"
    g = helper.make_graph(nodes, "gemv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])],
                          [onnx.numpy_helper.from_array(w, "w")])
    model = ir.serde.deserialize_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    quantize_weights(model, None if fmt == "fp32-nk" else fmt)
    build(ir.serde.serialize_model(model), out_dir, optimize=False)


def time_dispatch(dev, pipeline, entries, grid, repeat: int, probe) -> tuple[float, float]:
    """(wall seconds, CPU seconds) per dispatch, best of 5 submits of ``repeat`` dispatches each, after a
    warm-up that compiles the pipeline. lavapipe runs the kernels on threads of this process, so its CPU
    time is the work done even when other processes compete for the cores (wall time is then noisy)."""
    group = dev.create_bind_group(pipeline, entries)
    dev.submit([(pipeline, group, grid)], [])
    dev.device.queue.read_buffer(probe, 0, 4)
    wall = cpu = float("inf")
    for _ in range(5):
        t0, c0 = time.perf_counter(), time.process_time()
        dev.submit([(pipeline, group, grid)] * repeat, [])
        dev.device.queue.read_buffer(probe, 0, 4)
        wall = min(wall, (time.perf_counter() - t0) / repeat)
        cpu = min(cpu, (time.process_time() - c0) / repeat)
    return wall, cpu


def gemv_case(dev, k: int, n: int, fmt: str | None, repeat: int) -> tuple[tuple, int, str]:
    from webinfer import dims as D
    from webinfer.artifact import Artifact, program_view
    from webinfer.runtime.select import choose_program
    from webinfer.runtime.session import _PACK

    with tempfile.TemporaryDirectory() as d:
        build_case(k, n, fmt, d)
        art = Artifact.load(d)
        m = program_view(art.manifest, choose_program(art.spec, dev.facts()).index)  # the session's choice
        steps = [s for s in m["steps"] if s["label"].split(" ")[0].split(":")[-1] in ("MatMul", "MatMulQ")]
        assert len(steps) == 1, [s["label"] for s in m["steps"]]
        step = steps[0]
        shader = art.shader_sources()[step["shader"]]
        bufs, weight_bytes = [], 0
        for tid in step["reads"] + step["writes"]:
            t = m["tensors"][tid]
            nbytes = D.evaluate(["*", 1] + t["shape"], {}) * 4
            buf = dev.create_buffer(nbytes, "storage")
            if t["kind"] == "weight":
                weight_bytes += nbytes
                for shard, off, cnt, dst in t["chunks"]:
                    dev.write_buffer(buf, dst, art.read_shard(shard)[off:off + cnt])
            bufs.append((buf, 0, max(16, nbytes)))
        probe = bufs[-1][0]  # the output
        if step["uniforms"]:  # sizes live in a uniform buffer (the session's layout: after the storage buffers)
            values = [D.evaluate(v, {}) for _, _, v in step["uniforms"]]
            data = struct.pack("<" + "".join(_PACK[t] for _, t, _ in step["uniforms"]), *values)
            data += b"\0" * ((-len(data)) % 16)
            ubuf = dev.create_buffer(len(data), "uniform")
            dev.write_buffer(ubuf, 0, data)
            bufs.append((ubuf, 0, len(data)))
        pipeline = dev.create_pipeline(shader, [False] * len(step["reads"]) + [True] * len(step["writes"]),
                                       bool(step["uniforms"]))
        sec = time_dispatch(dev, pipeline, bufs, tuple(step["grid"]), repeat, probe)
        return sec, weight_bytes, step["label"]


def copy_case(dev, nbytes: int, repeat: int) -> tuple[float, float]:
    src, dst = dev.create_buffer(nbytes, "storage"), dev.create_buffer(nbytes, "storage")
    pipeline = dev.create_pipeline(COPY_WGSL, [False, True], False)
    groups = -(-nbytes // 16 // 64)
    grid = (min(groups, 65535), -(-groups // 65535), 1)
    return time_dispatch(dev, pipeline, [(src, 0, nbytes), (dst, 0, nbytes)], grid, repeat, dst)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--shapes", default="576x1536,576x49152")
    ap.add_argument("--formats", default="fp32,fp32-nk,int8,int4")
    args = ap.parse_args(argv)
    from webinfer.runtime.native import NativeDevice

    dev = NativeDevice()
    print(f"device: {dev.adapter_name}; GB/s from wall time, and per CPU-second (lavapipe's threads)")
    print(f"{'shape':>12} {'kernel':>6} {'weight MiB':>10} {'wall ms':>8} {'GB/s':>6} {'cpu ms':>8} {'GB/cpu-s':>8}")
    for shape in args.shapes.split(","):
        k, n = (int(v) for v in shape.split("x"))
        rows = [("copy", 2 * k * n * 4, copy_case(dev, k * n * 4, args.repeat))]
        for fmt in args.formats.split(","):
            sec, wbytes, _ = gemv_case(dev, k, n, None if fmt == "fp32" else fmt, args.repeat)
            rows.append((fmt, wbytes, sec))
        for name, nbytes, (wall, cpu) in rows:
            print(f"{shape:>12} {name:>6} {nbytes / 2**20:10.2f} {wall * 1e3:8.3f} {nbytes / wall / 1e9:6.2f} "
                  f"{cpu * 1e3:8.3f} {nbytes / cpu / 1e9:8.2f}")


if __name__ == "__main__":
    main()
