"""Common-subexpression elimination: onnx-ir's CommonSubexpressionEliminationPass (same op, domain,
inputs and attributes -> one node; non-deterministic ops such as Random* are left alone)."""

from __future__ import annotations

import onnx_ir as ir
from onnx_ir.passes.common import CommonSubexpressionEliminationPass

from ._util import count_nodes


def run(model: ir.Model) -> int:
    before = count_nodes(model)
    CommonSubexpressionEliminationPass()(model)
    return before - count_nodes(model)
