"""The manifest's ``output_formats`` block (graph/ml_outputs.py writes it, runtime/ml_outputs.py applies it): how a
classic-ML model's outputs are presented at run time, as onnxruntime returns them. Standard library only.

  output  the program output it applies to
  kind    ``labels``: int64 class indices -> the labels (a classifier's string labels);
          ``zipmap``: a float [rows, classes] tensor -> one {label: probability} dict per row (ZipMap)
  labels  the class labels, strings or integers (data: never pasted into a shader or a page)
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("labels", "zipmap")


@dataclass(frozen=True)
class OutputFormat:
    output: str
    kind: str
    labels: tuple


def read_output_formats(r, v) -> tuple[OutputFormat, ...]:
    """Type-check the block with the manifest reader ``r`` (format/fields.py); returns it typed."""
    out, seen = [], set()
    for i, f in enumerate(r.list(v, "output_formats")):
        where = f"output_formats[{i}]"
        r.obj(f, where, ("output", "kind", "labels"))
        name = r.str(f["output"], f"{where}.output", max_len=200)
        if name in seen:
            r.fail(f"{where}.output", f"output {name[:40]!r} formatted twice")
        seen.add(name)
        kind = r.str(f["kind"], f"{where}.kind", choices=KINDS)
        labels = r.list(f["labels"], f"{where}.labels")
        for j, label in enumerate(labels):
            if isinstance(label, bool) or not isinstance(label, (str, int)):
                r.fail(f"{where}.labels[{j}]", "expected a string or an integer")
            if isinstance(label, str):
                r.str(label, f"{where}.labels[{j}]", max_len=4096)
        if kind == "labels" and not all(isinstance(label, str) for label in labels):
            r.fail(f"{where}.labels", "a labels output maps indices to strings")
        out.append(OutputFormat(name, kind, tuple(labels)))
    return tuple(out)
