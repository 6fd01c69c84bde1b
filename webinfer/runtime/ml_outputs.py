"""Classic-ML outputs presented as onnxruntime returns them (the manifest's ``output_formats``, written by
graph/ml_outputs.py): a classifier's class indices become its string labels, a ZipMap's probability tensor a
list of {label: probability} dicts, one per row. The numbers come from the GPU; this only formats them at output
time. Standard library only (numpy used when present, as for every output)."""

from __future__ import annotations


def present(spec, names: list[str], values: list) -> list:
    """``values`` (arrays or HostTensors, in the order of ``names``) with the formatted outputs replaced."""
    formats = {f.output: f for f in spec.output_formats or ()}
    if not formats:
        return values
    return [_format(formats[n], v) if n in formats and not _formatted(v) else v for n, v in zip(names, values)]


def _formatted(value) -> bool:
    """Already in the presented form: an artifact built before its CPU model was rewritten (graph/cpu_model.py)
    gets ZipMap's dicts and string labels from onnxruntime itself."""
    return isinstance(value, list) or str(getattr(value, "dtype", "")) == "object"


def _rows(value) -> list:
    """A 1-D or 2-D output (a numpy array or a HostTensor) as a list of values or of rows."""
    flat = value.reshape(-1).tolist() if hasattr(value, "reshape") else value.tolist()
    if len(value.shape) < 2:
        return flat
    cols = value.shape[-1]
    return [flat[i:i + cols] for i in range(0, len(flat), cols)]


def _format(fmt, value):
    labels = fmt.labels
    if fmt.kind == "zipmap":
        return [dict(zip(labels, row)) for row in _rows(value)]
    texts = [labels[i] if 0 <= i < len(labels) else "" for i in _rows(value)]
    try:
        import numpy as np
    except ImportError:
        return texts
    out = np.empty(len(texts), dtype=object)
    out[:] = texts
    return out
