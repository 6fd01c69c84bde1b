"""What a lowering function sees of one node (``ctx`` in ``codegen/kernels/<family>.py``): its inputs and
attributes, how to make outputs (GPU tensors, build-time constants, symbolic host values, views) and how to
emit kernels (``ctx.dispatch``). The walk over the graph that makes one per node is ``codegen/lower.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import onnx_ir as ir

from .. import dims as D
from ..dims import Dim
from ..errors import UnsupportedOpError
from ..opschema import HOST_MAX_ELEMENTS
from ..options import KernelClass
from . import guard_scopes
from .program import Tensor

if TYPE_CHECKING:
    from .lower import Lowerer


class LowerContext:
    """What a lowering function sees of one node."""

    def __init__(self, lowerer: "Lowerer", node: ir.Node, index: int):
        self._l = lowerer
        self.node = node
        self.index = index
        self.op = node.op_type
        self.inputs: list[Tensor | None] = [lowerer.tensor_of(v) if v is not None else None for v in node.inputs]
        self.outputs: list[Tensor | None] = [None] * len(node.outputs)
        self.where = "gpu"
        self.opset = lowerer.opset
        self.kclass: KernelClass = lowerer.kclass  # the kernel class being lowered: its knobs choose variants

    @property
    def limits(self) -> dict[str, int]:
        """The device limits of the tier built for (options.LIMITS)."""
        return self._l.limits

    @property
    def generation(self) -> bool:
        """A build for generation (KV-cache states with bound dims): steps of one row (decode) are expected."""
        return bool(self._l.program.bounds)

    # -- inputs and attributes -------------------------------------------------------------
    def attr(self, name: str, default=None):
        a = self.node.attributes.get(name)
        if a is None:
            return default
        v = a.value
        if isinstance(v, ir.TensorProtocol):
            return v.numpy()
        if isinstance(v, (list, tuple)):
            return list(v)
        return v

    def has_input(self, i: int) -> bool:
        return i < len(self.inputs) and self.inputs[i] is not None

    def const(self, i: int) -> np.ndarray:
        """The value of an input that must be known at build time (a weight or shape arithmetic)."""
        t = self.inputs[i]
        if t is not None and t.value is not None:
            return t.value
        if t is not None and t.sym is not None and D.is_static(t.sym):
            return np.array(t.sym, dtype=np.int64).reshape([int(d) for d in t.shape])
        raise self.unsupported(f"input {i} must be a constant known at build time")

    def host_ints(self, i: int) -> list[Dim] | None:
        """Elements of a small integer input known at build time, possibly symbolic; None if data."""
        t = self.inputs[i]
        if t is None:
            return None
        if t.sym is not None:
            return list(t.sym)
        if t.value is not None and t.value.dtype.kind in "iub" and t.value.size <= HOST_MAX_ELEMENTS:
            return [int(v) for v in t.value.reshape(-1)]
        return None

    def assume(self, expr: Dim, why: str) -> None:
        """The build relies on ``expr >= 0`` for the input shapes (e.g. a slice start inside a symbolic axis):
        recorded as a guard the runtime checks per run, so shapes that break it get a clear error rather than
        a wrong answer. A static ``expr`` is checked now."""
        if isinstance(expr, int):
            if expr < 0:
                raise self.unsupported(why)
            return
        guard_scopes.record(self._l, expr, f"{self.op} (node {self.describe()}): {why}")  # (in its If branch)

    def unsupported(self, why: str) -> UnsupportedOpError:
        return UnsupportedOpError(f"{self.op} (node {self.describe()}): {why}")

    def describe(self) -> str:
        name = self.node.name or f"#{self.index}"
        return repr(name)

    # -- outputs -------------------------------------------------------------------------------
    def output(self, i: int, dtype: str, shape) -> Tensor:
        t = self._l.program.new_tensor(dtype, tuple(shape))
        self._set(i, t)
        return t

    def set_const(self, i: int, value: np.ndarray) -> Tensor:
        t = self._l.constant(np.asarray(value))
        self._set(i, t)
        self.where = "folded" if self.where != "host" else "host"
        return t

    def set_host(self, i: int, dtype: str, shape, values: list[Dim]) -> Tensor:
        """A small integer result of shape arithmetic (values may be symbolic)."""
        if len(values) > HOST_MAX_ELEMENTS:
            raise self.unsupported(f"host shape arithmetic on {len(values)} elements (limit {HOST_MAX_ELEMENTS})")
        self.where = "host"
        if D.is_static(values):
            t = self._l.constant(np.array(values, dtype=dtype).reshape([int(d) for d in shape]))
        else:
            t = self._l.program.new_tensor(dtype, tuple(shape), sym=list(values))
        self._set(i, t)
        return t

    def set_alias(self, i: int, src: Tensor, shape) -> Tensor:
        """A view: same storage, another shape (Reshape, Squeeze, Unsqueeze, Flatten, Identity)."""
        if src.value is not None:
            return self.set_const(i, src.value.reshape([int(d) for d in shape]))
        if src.sym is not None:
            return self.set_host(i, src.dtype, shape, src.sym)
        t = self._l.program.new_tensor(src.dtype, tuple(shape), alias=src)
        self._set(i, t)
        if self.where == "gpu" and not self._l.steps_of_node:
            self.where = "view"
        return t

    def _set(self, i: int, t: Tensor) -> None:
        self.outputs[i] = t

    # -- kernels -------------------------------------------------------------------------------
    def gpu(self, t: Tensor) -> Tensor:
        """Make a tensor available on the GPU: constants become weights, symbolic ints are filled."""
        return self._l.materialize(t)

    def temp(self, dtype: str, shape) -> Tensor:
        return self._l.program.new_tensor(dtype, tuple(shape))

    def shared(self, key: tuple, make):
        """``make()``'s tensors, made once for ``key`` and reused by later nodes (e.g. one activation
        quantized for the several GEMVs that read it). Not inside a region the runtime may skip (If branch,
        loop body), nor across control flow: there it is made again."""
        if self._l.region_depth:
            return make()
        memo, mark = self._l.shared_temps, len(self._l.program.control)
        if key not in memo or memo[key][0] != mark:
            memo[key] = (mark, make())
        return memo[key][1]

    def counted(self, count: Tensor, bound: int) -> Dim:
        """A dim whose value a kernel computed on the GPU: the first element of ``count`` (an int32 tensor
        written by the kernels dispatched so far), at most ``bound``. Buffers are sized at the bound; the
        runtime reads the count back before the next step (manifest ``control``: kind ``count``) and runs the
        rest with the dim set, so outputs are views of the counted prefix (NonZero, Unique, NMS, Range)."""
        lw = self._l
        name = f"__count{sum(c['kind'] == 'count' for c in lw.program.control)}"
        lw.program.bounds[name] = int(bound)
        lw.program.control.append({"kind": "count", "at": len(lw.program.steps), "tensor": self.gpu(count).id,
                                   "dim": name, "bound": int(bound)})
        return D.Sym.name(name)

    def dispatch(self, template: str, reads: dict, writes: dict, *, work: Dim | None = None,
                 grid: tuple | None = None, params: dict | None = None, wg: int = 256,
                 when: tuple | None = None, **tctx) -> None:
        """Emit one kernel. ``work`` is a count of invocations for 1-D kernels (grid derived).

        ``when=("eq"|"ne", dim, value)`` makes the step conditional on the bound dims (e.g. a GEMV that
        runs only when the row count is 1, beside a GEMM that runs otherwise); the run skips it else.
        """
        self._l.dispatch(template, reads, writes, work=work, grid=grid, params=params or {}, wg=wg,
                         label=f"{template.split('.')[0]}:{self.op}", node=self.index, tctx=tctx, when=when)
