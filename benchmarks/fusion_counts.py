"""Kernels per run against ONNX nodes: what the graph fusions leave of a model (a count, not a timing).

``python -m benchmarks.fusion_counts`` builds, for each kernel class, an encoder block spelled in primitive ops
as exporters write it (LayerNorm, 4-head attention, GELU MLP; batch 1, seq 16) and MiniLM at seq 128 when its
export is cached (``webinfer.models.export_minilm``), and prints nodes, kernels and their ratio.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile

import numpy as np
import onnx
import onnx.helper as h

F = onnx.TensorProto.FLOAT


def _layer_norm(x: str, p: str) -> list:
    """LayerNorm in primitives (older exporters): mean, centre, variance, sqrt, divide, scale, shift."""
    return [h.make_node("ReduceMean", [x], [f"{p}mu"], axes=[-1]), h.make_node("Sub", [x, f"{p}mu"], [f"{p}d"]),
            h.make_node("Pow", [f"{p}d", "two"], [f"{p}d2"]), h.make_node("ReduceMean", [f"{p}d2"], [f"{p}var"], axes=[-1]),
            h.make_node("Add", [f"{p}var", "eps"], [f"{p}ve"]), h.make_node("Sqrt", [f"{p}ve"], [f"{p}sd"]),
            h.make_node("Div", [f"{p}d", f"{p}sd"], [f"{p}n"]), h.make_node("Mul", [f"{p}n", f"{p}g"], [f"{p}s"]),
            h.make_node("Add", [f"{p}s", f"{p}b"], [f"{p}out"])]


def _gelu(x: str, y: str, spelling: str) -> list:
    if spelling == "erf":  # 0.5 * x * (1 + erf(x / sqrt 2))
        return [h.make_node("Div", [x, "sqrt2"], ["g_s"]), h.make_node("Erf", ["g_s"], ["g_e"]),
                h.make_node("Add", ["g_e", "one"], ["g_a"]), h.make_node("Mul", [x, "g_a"], ["g_m"]),
                h.make_node("Mul", ["g_m", "half"], [y])]
    # tanh: 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))
    return [h.make_node("Pow", [x, "three"], ["g_c"]), h.make_node("Mul", ["g_c", "c044"], ["g_k"]),
            h.make_node("Add", [x, "g_k"], ["g_i"]), h.make_node("Mul", ["g_i", "s2pi"], ["g_j"]),
            h.make_node("Tanh", ["g_j"], ["g_t"]), h.make_node("Add", ["g_t", "one"], ["g_a"]),
            h.make_node("Mul", [x, "g_a"], ["g_m"]), h.make_node("Mul", ["g_m", "half"], [y])]


def encoder_block(seq: int = 16, hidden: int = 64, heads: int = 4, mask: bool = True, gelu: str = "erf",
                  scale_on: str = "scores", cross: bool = False, seed: int = 0) -> tuple[onnx.ModelProto, dict]:
    """One post-attention-norm-free pre-norm encoder block in primitive ops, and feeds for it.

    ``scale_on``: "scores" (Div by sqrt(head) after q·kᵀ, BERT) or "qk" (Mul by head^-1/4 on q and on kᵀ,
    torch's sdpa decomposition); kᵀ is then spelled as two Transposes (heads, then the last two axes).
    ``cross``: keys and values are projected from a second input ``memory`` (a decoder's cross-attention).
    """
    rng = np.random.default_rng(seed)
    d = hidden // heads
    w = {n: (rng.standard_normal(s) / math.sqrt(s[0])).astype(np.float32) for n, s in
         (("wq", (hidden, hidden)), ("wk", (hidden, hidden)), ("wv", (hidden, hidden)), ("wo", (hidden, hidden)),
          ("w1", (hidden, 4 * hidden)), ("w2", (4 * hidden, hidden)))}
    w.update({n: (rng.standard_normal(s) * 0.1).astype(np.float32) for n, s in
              (("bq", (hidden,)), ("bk", (hidden,)), ("bv", (hidden,)), ("bo", (hidden,)), ("b1", (4 * hidden,)),
               ("b2", (hidden,)), ("l1b", (hidden,)), ("l2b", (hidden,)))})
    w.update({"l1g": 1 + 0.1 * rng.standard_normal(hidden).astype(np.float32),
              "l2g": 1 + 0.1 * rng.standard_normal(hidden).astype(np.float32)})
    w.update({"two": np.float32(2), "three": np.float32(3), "eps": np.float32(1e-5), "sqrt2": np.float32(math.sqrt(2)),
              "one": np.float32(1), "half": np.float32(0.5), "c044": np.float32(0.044715),
              "s2pi": np.float32(math.sqrt(2 / math.pi)), "scale": np.float32(math.sqrt(d)),
              "qscale": np.float32(d ** -0.25), "split": np.array([1, seq, heads, d], np.int64),
              "merge": np.array([1, seq, hidden], np.int64)})
    nodes = _layer_norm("x", "l1")
    for n in "qkv":
        src = "memory" if cross and n != "q" else "l1out"
        nodes += [h.make_node("MatMul", [src, f"w{n}"], [f"{n}m"]), h.make_node("Add", [f"{n}m", f"b{n}"], [f"{n}p"]),
                  h.make_node("Reshape", [f"{n}p", "split"], [f"{n}r"])]
    nodes += [h.make_node("Transpose", ["qr"], ["q"], perm=[0, 2, 1, 3]),
              h.make_node("Transpose", ["vr"], ["v"], perm=[0, 2, 1, 3])]
    if scale_on == "scores":
        nodes += [h.make_node("Transpose", ["kr"], ["kt"], perm=[0, 2, 3, 1]),
                  h.make_node("MatMul", ["q", "kt"], ["qk"]), h.make_node("Div", ["qk", "scale"], ["sc"])]
    else:
        nodes += [h.make_node("Transpose", ["kr"], ["k"], perm=[0, 2, 1, 3]),
                  h.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
                  h.make_node("Mul", ["q", "qscale"], ["qs"]), h.make_node("Mul", ["kt", "qscale"], ["kts"]),
                  h.make_node("MatMul", ["qs", "kts"], ["sc"])]
    if mask:
        nodes.append(h.make_node("Add", ["sc", "mask"], ["scm"]))
    nodes += [h.make_node("Softmax", ["scm" if mask else "sc"], ["pr"], axis=-1),
              h.make_node("MatMul", ["pr", "v"], ["ctx"]), h.make_node("Transpose", ["ctx"], ["ctxt"], perm=[0, 2, 1, 3]),
              h.make_node("Reshape", ["ctxt", "merge"], ["ctxm"]), h.make_node("MatMul", ["ctxm", "wo"], ["om"]),
              h.make_node("Add", ["om", "bo"], ["op"]), h.make_node("Add", ["x", "op"], ["r1"])]
    nodes += _layer_norm("r1", "l2")
    nodes += [h.make_node("MatMul", ["l2out", "w1"], ["f1"]), h.make_node("Add", ["f1", "b1"], ["f1b"])]
    nodes += _gelu("f1b", "act", gelu)
    nodes += [h.make_node("MatMul", ["act", "w2"], ["f2"]), h.make_node("Add", ["f2", "b2"], ["f2b"]),
              h.make_node("Add", ["r1", "f2b"], ["y"])]
    feeds = {"x": rng.standard_normal((1, seq, hidden)).astype(np.float32)}
    inputs = [h.make_tensor_value_info("x", F, [1, seq, hidden])]
    if cross:
        feeds["memory"] = rng.standard_normal((1, seq, hidden)).astype(np.float32)
        inputs.append(h.make_tensor_value_info("memory", F, [1, seq, hidden]))
    if mask:
        keep = np.ones((1, 1, 1, seq), np.float32)
        keep[..., seq - 3:] = 0  # the last three positions are padding
        feeds["mask"] = (1 - keep) * np.float32(-10000)
        inputs.append(h.make_tensor_value_info("mask", F, [1, 1, 1, seq]))
    graph = h.make_graph(nodes, "encoder_block", inputs, [h.make_tensor_value_info("y", F, [1, seq, hidden])],
                         [onnx.numpy_helper.from_array(np.asarray(v), n) for n, v in w.items()])
    proto = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    proto.ir_version = 9
    return onnx.shape_inference.infer_shapes(proto), feeds


def counts(model, dims: dict | None = None, target: str = "portable") -> list[tuple[str, int, int]]:
    """(kernel class, ONNX nodes, kernels per run) for each program of a build of ``model``."""
    from webinfer.artifact import program_view
    from webinfer.build import build
    from webinfer.report import build_report

    with tempfile.TemporaryDirectory() as out:
        manifest = build(model, out, dims=dims, target=target)
        rows = []
        for i in range(len(manifest["programs"])):
            r = build_report(program_view(manifest, i), dims)
            rows.append((r["kernel_class"], r["nodes"], r["kernels"]))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-minilm", action="store_true", help="only the encoder block")
    args = ap.parse_args(argv)
    models = [("encoder block (seq 16, 4 heads)", encoder_block()[0], None)]
    if not args.no_minilm:
        from webinfer.models import MINILM_NAME, default_cache_dir

        path = default_cache_dir() / MINILM_NAME / "model.onnx"
        if path.exists():
            models.append(("MiniLM (seq 128)", str(path), {"batch": 1, "sequence": 128}))
        else:
            print(f"MiniLM left out: {path} not there (python -m webinfer.models exports it)", file=sys.stderr)
    print(f"{'model':34} {'class':18} {'nodes':>6} {'kernels':>8} {'ratio':>7}")
    for name, model, dims in models:
        for kclass, nodes, kernels in counts(model, dims):
            print(f"{name:34} {kclass:18} {nodes:>6} {kernels:>8} {kernels / nodes:>7.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
