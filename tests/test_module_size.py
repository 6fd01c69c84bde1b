"""No module of the package is over 400 lines (Python and the page's JavaScript): new code goes in new modules
(issue 36). Counted as `wc -l` counts them."""

from __future__ import annotations

import os

import webinfer

PKG = os.path.dirname(os.path.abspath(webinfer.__file__))
LIMIT = 400


def _sizes(ext: tuple[str, ...]) -> dict[str, int]:
    out = {}
    for root, _, files in os.walk(PKG):
        for f in files:
            if f.endswith(ext):
                path = os.path.join(root, f)
                with open(path, "rb") as fh:
                    out[os.path.relpath(path, os.path.dirname(PKG))] = fh.read().count(b"\n")
    return out


def test_sizes_are_counted():
    sizes = _sizes((".py", ".mjs"))
    assert "webinfer/runtime/session.py" in sizes and "webinfer/site/worker.mjs" in sizes
    assert sizes["webinfer/runtime/session.py"] > 100


def test_no_module_over_400_lines():
    big = sorted(f"{rel}: {n} lines" for rel, n in _sizes((".py", ".mjs")).items() if n > LIMIT)
    assert not big, f"modules over {LIMIT} lines (split them along a seam):\n" + "\n".join(big)
