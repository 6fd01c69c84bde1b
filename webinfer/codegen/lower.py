"""Lower an onnx-ir graph to a Program: walk the nodes in order, infer shapes, call each op's lowering.

Three things can happen to a node, recorded per node in ``Program.placement``:
- ``gpu``: it became one or more WGSL dispatches;
- ``view``: it only reinterprets a shape (Reshape, Squeeze, ...), sharing the input's storage;
- ``host``: shape arithmetic on a small integer tensor (at most 64 elements), evaluated at build time,
  possibly symbolically (``[batch, seq * 12]``), never data; or ``folded``: all inputs were constants.
"""

from __future__ import annotations

import json

import numpy as np
import onnx_ir as ir

from .. import dims as D
from ..dims import Dim
from ..errors import UnsupportedOpError, WebinferError
from ..opschema import op_key, op_label, schema
from ..options import LIMITS, SOFTWARE, KernelClass
from . import emit, nested, packed
from .context import LowerContext
from .fold import fold_node
from .program import Program, Step, Tensor
from .registry import LOWERINGS, load_all


class Lowerer:
    def __init__(self, model: ir.Model, kclass: KernelClass = SOFTWARE, limits: str = "webgpu",
                 dim_values: dict | None = None, input_values: dict | None = None, validate: bool = True,
                 progress: bool = False, nested_inputs: dict | None = None, if_choices: dict | None = None):
        """``kclass``: the kernel class lowered for (options.py); ``limits``: the limits tier built for;
        ``nested_inputs``: the structure of sequence/optional graph inputs (codegen/nested.py)."""
        load_all()
        self.model = model
        self.opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx", 13))
        self.kclass = kclass
        self.limits = LIMITS[limits]
        self.split_parts: dict = {}  # (id(value), first, end row) -> (value, part): codegen/split.py
        self.program = Program()
        self.values: dict[str, Tensor] = {}
        # --dim name=value fixes a dim; name=(lo, hi) bounds it: sized at hi, lo checked at run time
        self.dim_values = {k: v for k, v in (dim_values or {}).items() if not isinstance(v, (tuple, list))}
        self.dim_ranges = {k: tuple(v) for k, v in (dim_values or {}).items() if isinstance(v, (tuple, list))}
        self.input_values = input_values or {}
        self.nested_inputs = nested_inputs or {}
        self.validator = emit.ShaderValidator() if validate else None
        self.steps_of_node = 0
        self.region_depth = 0  # > 0 while lowering a subgraph the runtime may skip (If branch, loop body)
        self.shared_temps: dict = {}  # LowerContext.shared
        self.progress = progress
        self.if_choices = if_choices or {}  # If node -> the branch built for its dim predicate (build.py)

    def tensor_of(self, v: ir.Value) -> Tensor:
        if v.name not in self.values:
            raise WebinferError(f"value {v.name!r} is used before it is produced (graph not in order?)")
        return self.values[v.name]

    def constant(self, value: np.ndarray) -> Tensor:
        return self.program.new_tensor(str(value.dtype), tuple(int(d) for d in value.shape), kind="const",
                                       value=value)

    def _dim(self, d, input_name: str, axis: int) -> Dim:
        if isinstance(d, int) and d >= 0:
            return d
        # an unnamed dim, or Paddle's -1 and "?" for "any size" (on H and W alike): a name of its own
        name = d.value if isinstance(d, ir.SymbolicDim) and d.value and d.value != "?" else None
        if name is None:
            name = f"{input_name}_{axis}"
        if name in self.dim_values:
            return int(self.dim_values[name])
        if name not in self.program.dims:
            self.program.dims.append(name)
        return D.Sym.name(name)

    def run(self) -> Program:
        g = self.model.graph
        init_names = set(g.initializers)
        kv = json.loads(g.metadata_props["webinfer.kv_cache"]) if "webinfer.kv_cache" in g.metadata_props else None
        states = set(kv["states"]) if kv else set()
        if kv:
            self.program.bounds = {**{d: int(kv["max_seq"]) for d in kv["bounded"]}, **kv.get("bounds", {})}
        for v in g.inputs:
            if v.name in init_names:
                continue
            if v.name in states:
                self._state_input(v, kv)
                continue
            if v.name in self.input_values:
                val = np.asarray(self.input_values[v.name])
                self.values[v.name] = self.constant(val)
                continue
            if type(v.type).__name__ in ("SequenceType", "OptionalType"):
                if v.name not in self.nested_inputs:
                    raise WebinferError(f"graph input {v.name!r} is a {v.type}: its structure must be given at "
                                        f"build time (nested_inputs)")
                self.values[v.name] = nested.nested_input(self, v, self.nested_inputs[v.name])
                continue
            if v.dtype is None or v.shape is None:
                raise WebinferError(f"graph input {v.name!r} has no declared type or rank")
            dt = v.dtype.numpy().name if v.dtype is not None else "float32"
            shape = tuple(self._dim(d, v.name, i) for i, d in enumerate(v.shape))
            t = self.program.new_tensor(dt, shape, kind="input", name=v.name)
            self.values[v.name] = t
            self.program.inputs.append((v.name, t))
        for name, v in g.initializers.items():
            if v.const_value is None:
                raise WebinferError(f"initializer {name!r} has no data")
            self.values[name] = self.constant(v.const_value.numpy())
        nodes = list(g)
        if self.progress:
            from tqdm import tqdm

            nodes = tqdm(nodes, desc="lowering", unit="node", leave=False, dynamic_ncols=True)
        self._bound_dims()  # (build.py checked the --dim names against the model)
        for index, node in enumerate(nodes):
            self.lower_node(node, index)
        for v in g.outputs:
            value = self.tensor_of(v)
            if nested.is_nested(value):
                nested.nested_output(self, v.name, value)
                continue
            self.program.outputs.append((v.name, self.materialize(value)))
        self.program.drop_dead_steps()
        return self.program

    def _bound_dims(self) -> None:
        """A bounded dim (--dim name=lo..hi) gets its bound (buffers sized for it) and a guard for its lower end."""
        for name, (lo, hi) in self.dim_ranges.items():
            self.program.bounds[name] = int(hi)
            self.program.guards.append((D.add(D.Sym.name(name), -int(lo)),
                                        f"--dim {name}={lo}..{hi}: {name} must be at least {lo}"))

    def _state_input(self, v: ir.Value, kv: dict) -> None:
        """A KV-cache input: a persistent buffer sized at the bound dim's maximum, never fed by the caller."""
        dt = v.dtype.numpy().name
        shape = tuple(self._dim(d, v.name, i) for i, d in enumerate(v.shape))
        past = D.Sym.name(kv["past_dim"])
        cap = {past: int(kv["max_seq"]), **{D.Sym.name(k): int(n) for k, n in kv.get("bounds", {}).items()}}
        capacity = tuple(next((n for b, n in cap.items() if d == b), d) for d in shape)
        if not all(isinstance(d, int) for d in capacity):
            raise WebinferError(f"KV cache {v.name!r}: shape {list(v.shape)} must be fixed apart from its sequence "
                                f"dim (build with --dim batch=1)")
        t = self.program.new_tensor(dt, shape, kind="state", name=v.name, capacity=capacity)
        self.values[v.name] = t
        self.program.states.append((v.name, t))

    def lower_node(self, node: ir.Node, index: int) -> None:
        ctx = LowerContext(self, node, index)
        fn = LOWERINGS.get(op_key(node.domain, node.op_type))
        self.steps_of_node = 0
        present = [t for t in ctx.inputs if t is not None]
        spec = schema(node.op_type, node.domain)
        # ops outside ONNX's domain have no reference implementation to fold with: their lowering takes constants.
        folded = None
        if present and all(isinstance(t, Tensor) and t.value is not None for t in present) and spec.may_fold:
            folded = fold_node(node, [t.value if t else None for t in ctx.inputs], self.opset)
            if folded is not None and fn is not None and packed.widens_packed(present, folded):
                folded = None  # keep the packed constant packed: the op runs as a kernel each run
        if folded is not None:
            for i, value in enumerate(folded):
                ctx.set_const(i, value)
        elif fn is None:
            raise UnsupportedOpError(f"unsupported op {op_label(node.domain, node.op_type)} (node {ctx.describe()})")
        else:
            fn(ctx)
        for i, v in enumerate(node.outputs):
            if ctx.outputs[i] is None:
                if v.name:
                    if i == 0 or not spec.optional_outputs:
                        raise ctx.unsupported(f"output {i} is not produced by webinfer")
                continue
            ctx.outputs[i].name = ctx.outputs[i].name or v.name
            self.values[v.name] = ctx.outputs[i]
        where = ctx.where if self.steps_of_node == 0 else "gpu"
        elements = [t.numel for t in ctx.outputs if t is not None]
        self.program.placement.append({"node": index, "op": node.op_type, "where": where,
                                       "dispatches": self.steps_of_node,
                                       "elements": [D.to_text(e) for e in elements]})

    def materialize(self, t: Tensor) -> Tensor:
        if t.value is not None:
            if t.kind == "const":
                t.kind = "weight"
            return t
        if t.sym is not None:
            out = self.program.new_tensor(t.dtype, t.shape)
            n = len(t.sym)
            params = {f"v{i}": ("i32", v) for i, v in enumerate(t.sym)}
            self.dispatch("fill.wgsl.j2", {}, {"out": out}, work=n, grid=None, params=params, wg=64,
                          label="fill", node=-1, tctx={"count": n})
            if not self.region_depth:  # a fill inside a branch or loop body may not run: fill again later
                t.sym, t.kind, t.alias = None, "temp", out
            return out
        return t

    def lower_subgraph(self, graph: ir.Graph, inputs: list[Tensor], conditional: bool = True) -> list[Tensor]:
        """Lower an If branch or a loop body where the current node's kernels go: ``inputs`` are its graph
        inputs' tensors; returns its outputs'. Its nodes get no placement rows (rows match the main graph's
        nodes); their dispatches count as the control node's. ``conditional``: the steps may not run."""
        for v, t in zip(graph.inputs, inputs):
            self.values[v.name] = t
        for name, v in graph.initializers.items():
            self.values[name] = self.constant(v.const_value.numpy())
        rows, steps = len(self.program.placement), self.steps_of_node
        self.region_depth += conditional
        try:
            for index, node in enumerate(graph):
                self.lower_node(node, index)
            return [self.tensor_of(v) for v in graph.outputs]
        finally:
            self.region_depth -= conditional
            body_steps = sum(p["dispatches"] for p in self.program.placement[rows:])
            del self.program.placement[rows:]
            self.steps_of_node = steps + body_steps

    def dispatch(self, template, reads, writes, *, work, grid, params, wg, label, node, tctx,
                 when: tuple | None = None) -> None:
        reads = {k: self.materialize(v) for k, v in reads.items()}
        lim = self.limits
        if len(reads) + len(writes) > lim["max_storage_buffers"]:
            raise WebinferError(f"internal error: {label} binds {len(reads) + len(writes)} storage buffers "
                                f"(limit {lim['max_storage_buffers']})")
        if wg > lim["max_invocations"]:
            raise WebinferError(f"internal error: {label} uses {wg} invocations per workgroup")
        wbases = {id(w.base) for w in writes.values()}
        if any(id(r.base) in wbases for r in reads.values()) or len(wbases) < len(writes):
            raise WebinferError(f"internal error: {label} binds overlapping writable ranges")
        for t in list(reads.values()) + list(writes.values()):
            nbytes = t.numel if isinstance(t.numel, int) else None
            if nbytes is not None and nbytes * 4 > lim["max_binding_bytes"]:
                raise WebinferError(f"{label}: a tensor of {nbytes * 4} bytes exceeds the binding limit "
                                    f"({lim['max_binding_bytes']})")
        params = {k: (v if isinstance(v, tuple) else ("u32", v)) for k, v in params.items()}
        if grid is None:
            groups = D.ceildiv(work, wg)
            gx = D.dmin(groups, lim["max_workgroups"])
            grid = (gx, D.ceildiv(groups, lim["max_workgroups"]), 1)
        for g in grid:
            if isinstance(g, int) and g > lim["max_workgroups"]:
                raise WebinferError(f"internal error: {label} dispatches {g} workgroups in one dimension")
        wgsl, uniforms = emit.render(template, reads, writes, params, wg, **tctx)
        if emit.indexes_packed_directly(wgsl, reads, writes, tctx.get("vec4_vars", ())):
            packed.dispatch_widened(self, template, reads, writes, work=work, grid=grid, params=params, wg=wg,
                                    label=label, node=node, tctx=tctx, when=when)
            return
        if emit.workgroup_bytes(wgsl) > lim["max_workgroup_bytes"]:
            raise WebinferError(f"internal error: {label} uses {emit.workgroup_bytes(wgsl)} bytes of workgroup "
                                f"memory (limit {lim['max_workgroup_bytes']})")
        if self.validator:
            self.validator.validate(wgsl, label)
        textures = {reads[name].id: fmt for name, fmt in (tctx.get("texture_vars") or {}).items()}
        self.program.steps.append(Step(wgsl, list(reads.values()), list(writes.values()), uniforms,
                                       tuple(grid), node=str(node), label=label, when=when, textures=textures))
        self.steps_of_node += 1
