"""Identity elimination: onnx-ir's IdentityEliminationPass (an Identity that is a graph output takes
its input's place and name, unless that input is a graph input, when the node stays)."""

from __future__ import annotations

import onnx_ir as ir
from onnx_ir.passes.common import IdentityEliminationPass

from ._util import count_nodes


def run(model: ir.Model) -> int:
    before = count_nodes(model)
    IdentityEliminationPass()(model)
    return before - count_nodes(model)
