"""Testing one rewrite rule alone (webinfer/graph/passes/rules.py): apply only that rule to a tiny model and
compare the rewritten graph with the original under onnx.reference. webinfer's own ops are evaluated by
the numpy definitions below (ONNX's formulas), written independently of the kernels."""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnx_ir as ir
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun
from scipy.special import erf

from webinfer.graph.passes.rules import Rule, apply


class _Ours(OpRun):
    op_domain = "webinfer"


class Gelu(_Ours):
    def _run(self, x, approximate="none"):
        if approximate == "tanh":
            return ((0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))).astype(x.dtype),)
        return ((0.5 * x * (1 + erf(x / math.sqrt(2)))).astype(x.dtype),)


class Swish(_Ours):
    def _run(self, x, alpha=1.0):
        return ((x / (1 + np.exp(-alpha * x))).astype(x.dtype),)


class RMSNormalization(_Ours):
    def _run(self, x, scale, axis=-1, epsilon=1e-5, stash_type=1):
        r = 1 / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True) + epsilon)
        return ((x * r * scale).astype(x.dtype),)


class LayerNormalization(_Ours):
    def _run(self, x, scale, bias=None, axis=-1, epsilon=1e-5, stash_type=1):
        d = x.astype(np.float64) - x.mean(axis=-1, keepdims=True)
        y = d / np.sqrt((d ** 2).mean(axis=-1, keepdims=True) + epsilon) * scale
        return ((y if bias is None else y + bias).astype(x.dtype),)


class SoftmaxTopK(_Ours):
    def _run(self, x, k, largest=1):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        p = (e / e.sum(axis=-1, keepdims=True)).astype(x.dtype)
        kk = int(np.asarray(k).reshape(-1)[0])
        order = np.argsort(-p if largest else p, axis=-1, kind="stable")[..., :kk]
        return p, np.take_along_axis(p, order, axis=-1), order.astype(np.int64)


OURS = [Gelu, Swish, RMSNormalization, LayerNormalization, SoftmaxTopK]


def rewrite(proto: onnx.ModelProto, rule: Rule) -> tuple[int, onnx.ModelProto, bool]:
    """(rewrites, the rewritten model, whether the pattern matched anywhere before)."""
    m = ir.serde.deserialize_model(proto)
    matched = any(True for node in m.graph for _ in rule.matches(node))
    n = apply(m, [rule])
    return n, ir.serde.serialize_model(m), matched


def check_rule(proto: onnx.ModelProto, rule: Rule, feeds: dict, fires: bool, rtol: float = 1e-5,
               atol: float = 1e-6) -> list[str]:
    """Apply ``rule`` alone: it fires (once) or its pattern matches and its condition refuses; the outputs
    of the result equal onnx.reference's on the original. Returns the op types left."""
    n, out, matched = rewrite(proto, rule)
    assert matched, f"{rule.name}: the pattern should match"
    assert n == (1 if fires else 0), f"{rule.name}: {n} rewrites"
    want = ReferenceEvaluator(proto).run(None, feeds)
    got = ReferenceEvaluator(out, new_ops=OURS).run(None, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return [node.op_type for node in out.graph.node]


def before(proto: onnx.ModelProto, rule_pass: str, quantize: str | None = None) -> ir.Model:
    """The model as the pipeline hands it to ``rule_pass``: every pass before it (and the weight packing
    ``quantize`` asks for) applied."""
    from webinfer.graph.optimize import optimize
    from webinfer.graph.passes import PASSES
    from webinfer.graph.quantize import rewrite as quantize_rewrite

    m = ir.serde.deserialize_model(proto)
    names = list(PASSES)
    optimize(m, names[:names.index(rule_pass)], quantize_rewrite(quantize) if quantize else None)
    return m


def run_as_is(m: ir.Model, feeds: dict, target: str = "software") -> list[np.ndarray]:
    """Build ``m`` without any graph pass (what a rule left is what runs) and run it natively."""
    import tempfile

    from webinfer.build import build
    from webinfer.runtime.inference import InferenceSession

    with tempfile.TemporaryDirectory() as tmp:
        build(ir.serde.serialize_model(m), tmp, optimize=False, generation=False, target=target)
        session = InferenceSession(tmp)
        return session.run([o.name for o in m.graph.outputs], feeds)


def check_rule_built(proto: onnx.ModelProto, rule: Rule, rule_pass: str, feeds: dict, fires: bool,
                     quantize: str | None = None, reference: onnx.ModelProto | None = None, rtol: float = 1e-4,
                     atol: float = 2e-4) -> list[str]:
    """For rules whose result is one of webinfer's kernels (no onnx.reference of its own): the graph as
    ``rule_pass`` receives it, ``rule`` alone applied (it fires once, or its pattern matches and its condition
    refuses), then built as is and run; compared with onnx.reference on ``reference`` (the original by
    default: a quantizing test passes the original with its weights rounded alike). Returns the op types."""
    m = before(proto, rule_pass, quantize)
    matched = any(True for node in m.graph for _ in rule.matches(node))
    assert matched, f"{rule.name}: the pattern should match"
    assert apply(m, [rule]) == (1 if fires else 0)
    ops = [node.op_type for node in m.graph]
    want = ReferenceEvaluator(reference or proto).run(None, feeds)
    for g, w in zip(run_as_is(m, feeds), want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return ops
