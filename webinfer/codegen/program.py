"""The build's intermediate result: tensors and kernel steps, before they are written as an artifact."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import dims as D
from ..dims import Dim


@dataclass(eq=False)
class Tensor:
    """A tensor of the lowered program.

    ``value`` holds a build-time constant (a weight, or a folded result); ``sym`` holds the elements of a
    small integer tensor computed from shapes (host shape arithmetic), possibly symbolic; ``alias`` names
    the tensor whose storage a view shares.
    """

    id: int
    dtype: str
    shape: tuple[Dim, ...]
    kind: str = "temp"  # input | weight | temp | state (a buffer that persists across runs: the KV cache)
    value: np.ndarray | None = None
    sym: list[Dim] | None = None
    alias: "Tensor | None" = None
    name: str | None = None  # graph value name (manifest only, never WGSL)
    capacity: tuple | None = None  # a state's allocated shape (its bound dim at the maximum)
    offset: Dim = 0  # a view's first element in its alias's storage (a band of an input past one binding)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> Dim:
        return D.product(self.shape)

    @property
    def base(self) -> "Tensor":
        t = self
        while t.alias is not None:
            t = t.alias
        return t

    @property
    def is_const(self) -> bool:
        return self.value is not None

    def __repr__(self) -> str:
        return f"Tensor#{self.id}<{self.dtype}{list(self.shape)}>"


@dataclass
class Step:
    """One dispatch: a shader, its bindings (reads then writes), dynamic params and grid."""

    shader: str  # WGSL source
    reads: list[Tensor]
    writes: list[Tensor]
    uniforms: list[tuple[str, str, Dim]]  # (name, wgsl type, value)
    grid: tuple[Dim, Dim, Dim]
    node: str = ""  # index of the ONNX node it came from, for reports
    label: str = ""  # kernel family + op, for profiles
    when: tuple | None = None  # ("eq"|"ne", dim, value): run only when the bound dims satisfy it
    textures: dict = field(default_factory=dict)  # id of a weight read as a texture -> its texel format


@dataclass
class Program:
    tensors: list[Tensor] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    inputs: list[tuple[str, Tensor]] = field(default_factory=list)
    outputs: list[tuple[str, Tensor]] = field(default_factory=list)
    placement: list[dict] = field(default_factory=list)  # per ONNX node: where it ran
    dims: list[str] = field(default_factory=list)
    states: list[tuple[str, Tensor]] = field(default_factory=list)  # KV-cache buffers, kept between runs
    bounds: dict[str, int] = field(default_factory=dict)  # dims sized at a maximum: one plan for all values
    index_bounds: dict[str, int] = field(default_factory=dict)  # input -> rows of the table it indexes
    control: list[dict] = field(default_factory=list)  # If/Loop/Scan step ranges the runtime drives
    # sequence/optional graph inputs and outputs -> their flat tensors' names (codegen/nested.py)
    groups: dict = field(default_factory=lambda: {"inputs": {}, "outputs": {}})
    guards: list[tuple[Dim, str]] = field(default_factory=list)  # (expr, why): shapes must keep expr >= 0
    # ((start, end), expr, why): a guard that holds only when that If branch runs (codegen/guard_scopes.py)
    branch_guards: list[tuple[tuple[int, int], Dim, str]] = field(default_factory=list)

    def drop_dead_steps(self) -> int:
        """Remove the steps whose results no later step, output or state reads (a value whose only use was
        its shape: ``Shape(Max(a, b))`` still lowered Max's kernel); returns how many. Programs driven by
        ``control`` (step ranges, counts read back) keep every step."""
        if self.control:
            return 0
        live = {t.base.id for _, t in self.outputs + self.states}
        kept: list[Step] = []
        dropped: dict = {}
        for step in reversed(self.steps):
            if any(w.base.id in live for w in step.writes):
                kept.append(step)
                live.update(r.base.id for r in step.reads)
            else:
                dropped[step.node] = dropped.get(step.node, 0) + 1
        self.steps = kept[::-1]
        for row in self.placement:
            row["dispatches"] -= dropped.get(str(row["node"]), 0)
        return sum(dropped.values())

    def new_tensor(self, dtype: str, shape, **kw) -> Tensor:
        t = Tensor(len(self.tensors), dtype, tuple(shape), **kw)
        self.tensors.append(t)
        return t
