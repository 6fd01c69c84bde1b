"""Every JavaScript module the page ships parses as an ES module (`node --check`): a duplicate export or a
syntax slip fails here in a second, not as a page that never becomes ready in a five-minute browser test."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SITE = Path(__file__).resolve().parents[1] / "webinfer" / "site"
MODULES = sorted(SITE.glob("*.mjs")) + sorted(SITE.glob("pages/*/*.mjs"))


@pytest.mark.parametrize("module", MODULES, ids=lambda p: str(p.relative_to(SITE)))
def test_module_parses(module):
    node = shutil.which("node")
    assert node, "node is needed (scripts/setup.sh installs it)"
    out = subprocess.run([node, "--check", str(module)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-1500:]
