"""Sequences and optionals whose structure is known at build time.

A sequence is a build-time list of tensors (``SeqValue``), an optional holds a tensor, a sequence or nothing
(``OptValue``); the sequence ops (codegen/kernels/sequence.py) rearrange the lists and only concatenating or
splitting dispatches kernels. A sequence (or optional) graph input needs its structure at build time
(``build(..., nested_inputs={name: example})``: a list of arrays, an array, or None for an empty optional,
of which only dtypes and shapes are used); it becomes plain tensor inputs ``name[0]``, ``name[1]``, ... and a
sequence output becomes outputs ``name[i]``. ``manifest["groups"]`` maps each such input and output name to
its structure (a flat name, a list of them, or None) so a caller can group them back (webinfer.backend does).
"""

from __future__ import annotations

import numpy as np

from .. import dims as D
from ..errors import WebinferError
from .program import Tensor


class SeqValue(list):
    """A sequence of known length: its element tensors, in order."""

    def __init__(self, items=(), dtype: str | None = None):
        super().__init__(items)
        self.dtype = dtype or (items[0].dtype if len(items) else None)
        self.name: str | None = None

    @property
    def numel(self):
        total = 0
        for t in self:
            total = D.add(total, t.numel)
        return total


class OptValue:
    """An optional: ``value`` is a Tensor, a SeqValue, or None (empty)."""

    def __init__(self, value):
        self.value = value
        self.name: str | None = None

    @property
    def numel(self):
        return 0 if self.value is None else self.value.numel


def unwrap(value):
    """The content of an optional (None when empty); anything else as it is."""
    return value.value if isinstance(value, OptValue) else value


def nested_input(lowerer, v, example):
    """Tensor inputs for a sequence/optional graph input, from an example of its structure."""
    def tensor_input(name: str, arr) -> Tensor:
        arr = np.asarray(arr)
        t = lowerer.program.new_tensor(str(arr.dtype), tuple(int(d) for d in arr.shape), kind="input", name=name)
        lowerer.program.inputs.append((name, t))
        return t

    seq = type(v.type).__name__ == "SequenceType"
    inner = getattr(v.type, "elem_type", None)
    inner_seq = seq or type(inner).__name__ == "SequenceType"
    if example is None:
        if seq:
            raise WebinferError(f"graph input {v.name!r} is a sequence: give its elements, not None")
        lowerer.program.groups["inputs"][v.name] = None
        return OptValue(None)
    if inner_seq:
        if not isinstance(example, (list, tuple)):
            raise WebinferError(f"graph input {v.name!r} is a sequence: give a list of arrays")
        items = SeqValue([tensor_input(f"{v.name}[{i}]", a) for i, a in enumerate(example)],
                         dtype=v.dtype.numpy().name if v.dtype is not None else None)
        lowerer.program.groups["inputs"][v.name] = [t.name for t in items]
        return items if seq else OptValue(items)
    t = tensor_input(v.name, example)
    lowerer.program.groups["inputs"][v.name] = v.name
    return OptValue(t)


def nested_output(lowerer, name: str, value) -> None:
    """Flat outputs for a graph output that holds a sequence or an optional."""
    value = unwrap(value)
    if value is None:
        lowerer.program.groups["outputs"][name] = None
        return
    if isinstance(value, SeqValue):
        names = []
        for i, t in enumerate(value):
            names.append(f"{name}[{i}]")
            lowerer.program.outputs.append((names[-1], lowerer.materialize(t)))
        lowerer.program.groups["outputs"][name] = names
        return
    lowerer.program.outputs.append((name, lowerer.materialize(value)))
    lowerer.program.groups["outputs"][name] = name


def is_nested(value) -> bool:
    return isinstance(value, (SeqValue, OptValue))
