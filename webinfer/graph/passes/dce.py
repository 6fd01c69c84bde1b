"""Dead-code elimination: onnx-ir's RemoveUnusedNodesPass (nodes whose outputs nobody reads, unused
initializers), which already does this generically and in place."""

from __future__ import annotations

import onnx_ir as ir
from onnx_ir.passes.common import RemoveUnusedNodesPass

from ._util import count_nodes


def run(model: ir.Model) -> int:
    before = count_nodes(model)
    RemoveUnusedNodesPass()(model)
    return before - count_nodes(model)
