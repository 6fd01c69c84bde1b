"""The passes' layout: no pass imports another module's private helpers (shared matching helpers live in
passes/match.py, graph edits in passes/_util.py), and every rule a pass module lists has a test of its own
in tests/graph/test_rules_*.py that names it."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import webinfer.graph.passes as passes
from webinfer.graph.passes.rules import Rule

PASSES_DIR = Path(passes.__file__).parent
TESTS = Path(__file__).parent


def _modules() -> list[Path]:
    return sorted(p for p in PASSES_DIR.glob("*.py") if p.name != "__init__.py")


def test_no_pass_imports_a_private_name():
    bad = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                bad += [f"{path.name}: {node.module}.{a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    assert not bad, bad


def test_every_rule_has_a_test_of_its_own():
    texts = "\n".join(p.read_text() for p in TESTS.glob("test_rules_*.py"))
    rules = {}
    for path in _modules():
        module = importlib.import_module(f"webinfer.graph.passes.{path.stem}")
        for name, value in vars(module).items():
            if isinstance(value, Rule) and name.isupper():
                rules[name] = value
    assert len(rules) >= 20, sorted(rules)
    assert len({r.name for r in rules.values()}) == len(rules), "two rules share a name"
    untested = sorted(n for n in rules if f"{n}," not in texts and f"{n}\n" not in texts and f"{n} " not in texts)
    assert not untested, untested


def test_pass_modules_stay_small():
    assert all(len(p.read_text().splitlines()) < 400 for p in _modules())
