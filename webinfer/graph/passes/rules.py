"""Fusions as rules: a pattern, a condition and a replacement, applied by one driver.

- **pattern** ``(node) -> Match | Iterable[Match] | None``: the nodes of the spelling anchored at ``node`` and
  how they connect (op types, which input reads which output, constants that identify the formula), binding
  the values the replacement needs by role. An iterable gives alternatives (a commutative input order), tried
  in turn.
- **condition** ``(Match) -> bool``: what must hold for the rewrite to keep the graph's meaning and for the
  kernel to exist (dtypes, the axis, static lengths, constant operands of the right size).
- **replacement** ``(model, Match) -> bool | None``: builds the new nodes in place of the matched ones;
  ``False`` when the graph refuses the edit (a graph output whose name cannot move), and the driver tries the
  next alternative.

Each rule is tested alone (tests/graph/test_rules_*.py): a tiny graph where it fires, one where its
condition refuses, the rewritten graph checked numerically against onnx.reference on the original one.
The driver is ours rather than onnxscript's rewriter (``pattern.RewriteRule``): tried on SiLU it gave the
same artifacts, but ``apply_to_model`` also rewrites inside If/Loop bodies, which our passes leave alone
(they rewrite the main graph only), and onnxscript 0.7 offers no public way to keep it there; several
patterns also end in optional tails (a norm's weight and bias), one rewriter rule per combination there.
The connected-group elementwise fusion (fuse_elementwise.py) and sink_transposes.py stay imperative: they
grow a region over any number of nodes, not a fixed pattern.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import onnx_ir as ir

ONNX_DOMAINS = ("", "ai.onnx")


@dataclass
class Match:
    """What a pattern found: the matched ``nodes`` (the replacement removes those it replaces) and the
    values, nodes and constants it bound, by role."""

    nodes: list[ir.Node]
    values: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, role: str) -> Any:
        return self.values[role]

    def get(self, role: str, default: Any = None) -> Any:
        return self.values.get(role, default)


def always(match: Match) -> bool:
    """The condition of a rule whose pattern already says everything."""
    return True


@dataclass(frozen=True)
class Rule:
    name: str
    ops: tuple[str, ...]  # the anchor node's op types
    pattern: Callable[[ir.Node], Match | Iterable[Match] | None]
    condition: Callable[[Match], bool]
    replacement: Callable[[ir.Model, Match], bool | None]
    domains: tuple[str, ...] = ONNX_DOMAINS  # the anchor's domains

    def matches(self, node: ir.Node) -> Iterator[Match]:
        """The pattern's matches at ``node`` (nothing when the anchor's op or domain differs)."""
        if node.op_type not in self.ops or node.domain not in self.domains:
            return
        found = self.pattern(node)
        if found is not None:
            yield from ([found] if isinstance(found, Match) else found)

    def apply_at(self, model: ir.Model, node: ir.Node) -> bool:
        """Rewrite at ``node`` with the first match whose condition holds and whose replacement succeeds."""
        for m in self.matches(node):
            if self.condition(m) and self.replacement(model, m) is not False:
                return True
        return False


def apply(model: ir.Model, rules: Sequence[Rule], *, rounds: int | None = 1) -> int:
    """Visit the main graph's nodes in order, at each one trying ``rules`` in order (the first that fires
    wins); sweep again, at most ``rounds`` times in all (None: no limit), while a sweep changes something, so
    chains collapse. Returns the rewrites."""
    graph = model.graph
    count, sweeps = 0, 0
    while rounds is None or sweeps < rounds:
        sweeps += 1
        changed = 0
        for node in list(graph):
            if node.graph is not graph:
                continue
            changed += any(rule.apply_at(model, node) for rule in rules)
        count += changed
        if not changed:
            break
    return count


def pass_of(*rules: Rule, rounds: int | None = 1) -> Callable[[ir.Model], int]:
    """A graph pass (``run(model) -> int``) applying ``rules``."""
    def run(model: ir.Model) -> int:
        return apply(model, rules, rounds=rounds)
    return run
