"""Op declarations as data (webinfer/opschema.py): the tables derived from them agree with ONNX's own op
schemas and with the lowerings (graph/ reads them without importing codegen/: tests/test_imports.py)."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from webinfer import opschema
from webinfer.codegen.registry import LOWERINGS, load_all

ROOT = Path(opschema.__file__).parent


def _onnx_schema(op: str):
    try:
        return onnx.defs.get_schema(op)
    except onnx.defs.SchemaError:
        return None


def test_elementwise_declarations_match_the_table():
    from webinfer.codegen.kernels import elementwise as ew

    declared = opschema.elementwise_ops()
    assert declared == set(ew.OPS), (f"declare in opschema: {sorted(set(ew.OPS) - declared)}; "
                                     f"not in elementwise.OPS: {sorted(declared - set(ew.OPS))}")
    for op in declared:  # ONNX's schema agrees: one output, same shape as the (broadcast) inputs
        s = _onnx_schema(op)
        assert s is not None and s.max_output == 1, op


@pytest.mark.parametrize("op", sorted(opschema.host_inputs()))
def test_host_input_positions_exist_in_onnx(op):
    s = _onnx_schema(op)
    assert s is not None, op
    for pos in opschema.host_inputs()[op]:
        assert pos < len(s.inputs), f"{op} has no input {pos}"
        assert s.inputs[pos].option != onnx.defs.OpSchema.FormalParameterOption.Variadic, (op, pos)


def test_optional_outputs_are_really_optional():
    for key, s in opschema.SCHEMAS.items():
        if s.optional_outputs:
            ref = _onnx_schema(s.op)
            assert ref is not None and ref.max_output > 1, key


def test_declared_webinfer_and_contrib_ops_are_lowered():
    from webinfer.graph.contrib import EXPANSIONS

    load_all()
    for key, s in opschema.SCHEMAS.items():
        if s.expanded:
            assert key in EXPANSIONS and key not in LOWERINGS, f"{key}: declared expanded, graph/contrib has none"
        elif s.domain != opschema.ONNX_DOMAIN:
            assert key in LOWERINGS, f"{key} is declared but has no lowering"
        if s.epilogue:
            assert opschema.op_key(opschema.WEBINFER_DOMAIN, s.epilogue) in LOWERINGS, s.epilogue


def test_defaults_and_folding():
    assert opschema.schema("Reshape").host_inputs == (1,)
    assert opschema.schema("Reshape", "ai.onnx") is opschema.schema("Reshape")
    assert opschema.schema("NoSuchOp").may_fold  # an undeclared ONNX op folds with the reference evaluator
    assert not opschema.schema("RandomNormal").may_fold
    assert not opschema.schema("Gelu", opschema.WEBINFER_DOMAIN).may_fold  # no reference implementation
    assert not opschema.schema("Anything", opschema.MICROSOFT_DOMAIN).may_fold
    assert opschema.op_key("com.microsoft", "MatMulNBits") == "com.microsoft:MatMulNBits"
    assert opschema.op_label("com.microsoft", "MatMulNBits") == "com.microsoft.MatMulNBits"
    assert opschema.schema("MatMulNBits", opschema.MICROSOFT_DOMAIN).expanded
    assert not opschema.schema("SimplifiedLayerNormalization").may_fold  # onnxruntime's, in ONNX's domain


def test_reductions_are_onnx_reduce_ops_and_lowered():
    onnx_reduce = {s.name for s in onnx.defs.get_all_schemas() if s.domain == "" and s.name.startswith("Reduce")}
    assert set(opschema.reduce_ops()) == onnx_reduce
    load_all()
    assert all(op in LOWERINGS for op in opschema.reduce_ops())
