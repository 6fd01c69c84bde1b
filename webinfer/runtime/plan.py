"""The typed objects between planning and executing: what a plan holds for one binding of the dims, and what
a launched run hands to ``collect``. Standard library only (runs in Pyodide).

A :class:`Plan` is made by runtime/planner.py (memory plan, allocation, bind groups, uniforms), refreshed per
run for the dims that change without a new plan (grids, and the uniforms of steps on bound dims), and read by
runtime/execute.py (one submit) and runtime/control_flow.py (a walk over the steps).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


class Dispatch(NamedTuple):
    """One compute dispatch, as the devices' ``submit`` and ``profile`` take it."""

    pipeline: object
    bind_group: object
    grid: tuple


class Readback(NamedTuple):
    """A mappable buffer an output is copied into, and its size in bytes."""

    buffer: object
    size: int


@dataclass
class PlannedStep:
    """A step the plan can dispatch: its bind group made, its uniforms written (``uniform_key`` names the
    buffer in ``Plan.uniforms``; None when the step has none). ``grid`` is the current run's (None: it does
    not dispatch at these dims), set by the planner's refresh."""

    index: int  # the step's index in the program
    pipeline: object
    bind_group: object
    uniform_key: str | None
    grid: tuple | None = None
    dispatch: Dispatch | None = None  # (pipeline, bind group, grid), made again only when the grid changes


@dataclass
class Plan:
    """Buffers and bind groups for one binding of the dims (bounded dims at their bound)."""

    buffers: dict[int, object]  # tensor -> buffer (weights, states, slots; a texture for a texture-bound weight)
    base: list[int]  # tensor -> the tensor whose buffer it views (itself when it is no alias)
    numel: list[int]  # elements each tensor is sized for
    steps: list[PlannedStep]  # in program order; steps left out (a branch that cannot run, empty) are absent
    readbacks: dict[str, Readback]  # output name -> its readback buffer
    owned: list  # the buffers this plan created (destroyed with it)
    bytes: int  # GPU bytes of its slots, uniforms and readbacks
    uniforms: dict[str, object]  # uniform key -> buffer (steps with the same expressions share one)
    env: dict | None = None  # the dims of the last refresh
    dispatches: list[Dispatch] = field(default_factory=list)  # this run's, in order
    spare_readbacks: dict[str, Readback] | None = None  # a second set for overlapped launches (made on first use)
    turn: bool = False  # which set the last overlapped launch used

    def buffer_of(self, tid: int):
        """The buffer holding tensor ``tid`` (its base's, for a view)."""
        return self.buffers[self.base[tid]]

    def by_index(self) -> dict[int, PlannedStep]:
        return {s.index: s for s in self.steps}


@dataclass
class Ticket:
    """A launched run: ``SessionCore.collect(ticket)`` reads its outputs."""

    names: list[str]  # the outputs asked for, in order
    shapes: dict[str, list[int]]
    readbacks: dict[str, Readback]
    outputs: dict[str, object]  # output name -> the GPU buffer holding it (a later run may read it on the GPU)
