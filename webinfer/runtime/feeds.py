"""Binding feeds: a run's feeds checked against the program's inputs (names, dtypes, ranks, static sizes) and
the symbolic dims bound from their shapes. Reads the typed manifest (format/schema.py). Standard library only."""

from __future__ import annotations

from .. import dims as D
from ..errors import WebinferError
from ..format.schema import Manifest, Program
from ..format.steps import check_dims
from .tensor import HostTensor, as_host, check_index_bounds


def bind_feeds(spec: Manifest, program: Program, feeds: dict, dims: dict | None = None
               ) -> tuple[dict, dict[str, HostTensor]]:
    """(dims, host tensors by input name); ``dims`` binds those that no fed input carries (the KV cache's past
    length). Every mismatch is one WebinferError naming the input."""
    names = {io.name for io in spec.inputs}
    for name in feeds:
        if name not in names:
            raise WebinferError(f"unknown input {name!r} (the model's inputs: {', '.join(sorted(names))})")
    env: dict[str, int] = {k: int(v) for k, v in (dims or {}).items()}
    host: dict[str, HostTensor] = {}
    for io in spec.inputs:
        name, t = io.name, spec.tensors[io.tensor]
        if name not in feeds:
            raise WebinferError(f"missing feed for input {name!r}")
        h = as_host(feeds[name], name)
        if h.dtype != t.dtype:
            raise WebinferError(f"input {name!r} expects {t.dtype}, got {h.dtype}")
        if len(h.shape) != len(t.shape):
            raise WebinferError(f"input {name!r} expects rank {len(t.shape)}, got shape {list(h.shape)}")
        for axis, (want, got) in enumerate(zip(t.shape, h.shape)):
            if isinstance(want, str):
                if env.setdefault(want, got) != got:
                    raise WebinferError(f"input {name!r} axis {axis}: dim {want!r} is {env[want]} elsewhere, "
                                        f"got {got}")
            elif isinstance(want, int) and want != got:
                raise WebinferError(f"input {name!r} expects shape {shape_text(t.shape)}, got {list(h.shape)}")
        host[name] = h
    for io in spec.inputs:
        for axis, (want, got) in enumerate(zip(spec.tensors[io.tensor].shape, host[io.name].shape)):
            if not isinstance(want, (int, str)) and D.evaluate(want, env) != got:
                raise WebinferError(f"input {io.name!r} axis {axis}: expected {D.evaluate(want, env)}")
    missing = [d for d in spec.dims if d not in env]
    if missing:
        raise WebinferError(f"dims {missing} are not bound by any input")
    check_index_bounds(spec.index_bounds, host)
    check_dims(spec, program, env)
    return env, host


def shape_text(shape) -> str:
    return "[" + ", ".join(str(d) if isinstance(d, (int, str)) else "?" for d in shape) + "]"
