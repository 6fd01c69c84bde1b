"""Is a mismatch one node's fault? ``python -m benchmarks.zoo.localize ID [--target T] [--cache DIR]``.

A model with int8 activations (QuantizeLinear after every layer) can be ill-conditioned: a float rounding
difference of 1e-7 flips one rounded value by a whole quantization step, and the flips compound layer after
layer, so two correct implementations (even onnxruntime with and without its graph optimizations) disagree on the
output by tens of percent. Comparing outputs then says nothing. This checks each node instead: the model is built
with every float intermediate exposed as an output, run once, and every node is run alone by onnxruntime (graph
optimizations off) on *webinfer's own* values of its inputs; a node whose output differs from webinfer's is wrong,
whatever the model's conditioning, unless onnxruntime's own output moves as far when those inputs get rounding
noise (a recurrent node that rounds its state to uint8 every step is ill-conditioned inside itself). Models with
subgraphs (If, Loop, Scan) are not checked (None).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile

import numpy as np

LOCAL_TOLERANCE = 1e-4  # one node on equal inputs: float rounding only (int8 steps are ~1e-2 of the scale)
ULPS = 1e-6  # relative noise of ~8 float32 ulps (a dot product over k terms in another order: ~sqrt(k) ulps)


def perturbed(feeds: dict, seed: int) -> dict:
    """``feeds`` with every float32 array times 1 + ULPS * N(0, 1): rounding-level noise."""
    rng = np.random.default_rng(seed)
    return {k: np.asarray(v * (1 + ULPS * rng.standard_normal(v.shape)), np.float32)
            if isinstance(v, np.ndarray) and v.dtype == np.float32 else v for k, v in feeds.items()}


def rel_error(got, want) -> float:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return float("inf")
    if want.size == 0:
        return 0.0
    peak = float(np.abs(want).max())
    err = float(np.abs(got.astype(np.float64) - want).max())
    return err / peak if peak > 0 else err


def _has_subgraphs(graph) -> bool:
    return any(a.type in (a.GRAPH, a.GRAPHS) for n in graph.node for a in n.attribute)


def exposed(proto, names: list[str]):
    """``proto`` with ``names`` (float32 values) appended to its outputs, the original outputs first."""
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(proto)
    have = {o.name for o in out.graph.output}
    for name in names:
        if name not in have:
            out.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    return out


def float_values(proto) -> list[str]:
    """Names of the float32 values nodes compute (shape inference's types), in node order."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(proto)
    types = {v.name: v.type.tensor_type.elem_type for v in inferred.graph.value_info}
    types.update({v.name: v.type.tensor_type.elem_type for v in inferred.graph.output})
    return [o for n in proto.graph.node for o in n.output if o and types.get(o) == onnx.TensorProto.FLOAT]


def run_node(node, opsets, feeds: dict, functions=()) -> list:
    """One node alone, run by onnxruntime with its graph optimizations off."""
    import onnx
    import onnxruntime as ort

    inputs = [onnx.helper.make_tensor_value_info(k, onnx.helper.np_dtype_to_tensor_dtype(v.dtype), None)
              for k, v in feeds.items()]
    graph = onnx.helper.make_graph([node], "one", inputs, [onnx.ValueInfoProto(name=o) for o in node.output if o])
    model = onnx.helper.make_model(graph, opset_imports=opsets, functions=list(functions))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def exact_check(node, opsets, feeds_of: dict, name: str, got, want) -> dict:
    """The node in float64 (onnx.reference on its float32 inputs widened): onnxruntime's float32 value is not
    exact either (a mean of 262,144 values summed in one float32 chain is off by 1e-3), so a node differing from
    it is judged by which of the two is nearer the float64 value. {} when the node cannot be run so."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    if not all(v.dtype == np.float32 or v.dtype.kind in "iub" for v in feeds_of.values()):
        return {}
    wide = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in feeds_of.items()}
    inputs = [onnx.helper.make_tensor_value_info(k, onnx.helper.np_dtype_to_tensor_dtype(v.dtype), None)
              for k, v in wide.items()]
    graph = onnx.helper.make_graph([node], "one", inputs, [onnx.ValueInfoProto(name=o) for o in node.output if o])
    try:
        outs = ReferenceEvaluator(onnx.helper.make_model(graph, opset_imports=opsets)).run(None, wide)
        exact = np.asarray(outs[[o for o in node.output if o].index(name)], np.float64)
    except Exception:  # an op or type the reference does not run: the node stays judged against onnxruntime
        return {}
    if exact.shape != got.shape:
        return {}
    return {"rel_exact": rel_error(got, exact), "ort_exact": rel_error(want, exact)}


def check_nodes(proto, feeds: dict, values: dict) -> list[dict]:
    """Each node against onnxruntime on the implementation's ``values`` of its inputs, in node order.

    ``values`` maps value names to what the implementation under test computed; a value it does not give
    (an integer, a constant) is taken from the reference's own run. Returns one row per compared output:
    node, op, output, rel (max abs error / max abs of the reference's output).
    """
    from onnx import numpy_helper

    env = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
    env.update(feeds)
    rows = []
    for node in proto.graph.node:
        feeds_of = {i: env[i] for i in dict.fromkeys(node.input) if i}
        outs = run_node(node, proto.opset_import, feeds_of, proto.functions)
        for k, (name, want) in enumerate(zip([o for o in node.output if o], outs)):
            if name in values:
                got, want = np.asarray(values[name]), np.asarray(want)
                row = {"node": node.name, "op": node.op_type, "output": name, "rel": rel_error(got, want)}
                if not row["rel"] <= LOCAL_TOLERANCE and got.shape == want.shape:
                    row.update(exact_check(node, proto.opset_import, feeds_of, name, got, want))
                    row["spread"] = max(rel_error(run_node(  # how far onnxruntime moves on rounding noise in the
                        node, proto.opset_import, perturbed(feeds_of, seed), proto.functions)[k], want)  # node's
                        for seed in (1, 2, 3))  # float inputs and weights (its bias: each step)
                rows.append(row)
                env[name] = got
            else:
                env[name] = want
    return rows


def localize(proto, feeds: dict, target: str = "portable") -> list[dict] | None:
    """Build ``proto`` with its float intermediates exposed, run it natively, check every node (None: not checkable)."""
    from webinfer.build import build
    from webinfer.runtime.inference import InferenceSession

    if _has_subgraphs(proto.graph):
        return None
    names = float_values(proto)
    with tempfile.TemporaryDirectory(prefix="zoo-localize-") as tmp:
        build(exposed(proto, names), tmp, target=target)
        got = InferenceSession(tmp).run(names, feeds)
    return check_nodes(proto, feeds, dict(zip(names, got)))


def first_wrong(rows: list[dict], tolerance: float = LOCAL_TOLERANCE) -> dict | None:
    """The first node off onnxruntime's value by more than ``tolerance`` and twice what rounding noise moves
    onnxruntime's own output by (an LSTM rounding H to uint8 every step flips a step on a 1-ulp change, then
    diverges), and not nearer the float64 value than onnxruntime is."""
    def right(r):
        return (r["rel"] <= max(tolerance, 2 * r.get("spread", 0.0))
                or r.get("rel_exact", np.inf) <= max(tolerance, r.get("ort_exact", 0.0)))
    return next((r for r in rows if not right(r)), None)


def main(argv=None) -> int:
    import onnx
    import onnxruntime as ort

    from benchmarks.zoo.inputs import Recipes
    from benchmarks.zoo.worker import default_cache, load_zoo

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--target", default="portable")
    ap.add_argument("--cache", default=None)
    args = ap.parse_args(argv)
    cache = default_cache() if args.cache is None else __import__("pathlib").Path(args.cache)
    entry = next(m for m in load_zoo()["models"] if m["id"] == args.model)
    path = cache / "models" / f"{args.model}.onnx"
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = Recipes(cache).make(entry, ref.get_inputs())
    rows = localize(onnx.load(str(path)), feeds, args.target)
    if rows is None:
        print(json.dumps({"id": args.model, "checked": False, "why": "the model has subgraphs"}))
        return 0
    worst = max(rows, key=lambda r: r["rel"], default=None)
    print(json.dumps({"id": args.model, "checked": len(rows), "first_wrong": first_wrong(rows), "worst": worst}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
