"""WGSL helpers for IEEE special values: NaN and infinity propagate as onnxruntime propagates them.

WGSL leaves ``max``/``min``/``clamp``/``sign``/``atan`` of a NaN implementation-defined (lavapipe returns
the other operand, 0, or a clamp bound), and a shader compiler may assume no NaN when it sees ``x != x``.
So NaN is detected by its bits, and the helpers return the NaN operand itself (no arithmetic that a
compiler could fold). ``helper_sources(text)`` returns the sources of every helper ``text`` calls, with
the helpers those call in turn.
"""

from __future__ import annotations

FLOAT_HELPERS = {
    "is_nan": "fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }",
    # Max/Min/Relu and ReduceMax/ReduceMin: a NaN operand wins (onnxruntime, numpy.maximum).
    "max_nan": "fn max_nan(a: f32, b: f32) -> f32 { if (is_nan(a)) { return a; } if (is_nan(b)) { return b; } "
               "return max(a, b); }",
    "min_nan": "fn min_nan(a: f32, b: f32) -> f32 { if (is_nan(a)) { return a; } if (is_nan(b)) { return b; } "
               "return min(a, b); }",
    # Clip: a NaN input stays NaN; a NaN bound is ignored (onnxruntime's Clip).
    "clip_nan": """fn clip_nan(x: f32, lo: f32, hi: f32) -> f32 {
  if (is_nan(x)) { return x; }
  var r = x;
  if (r < lo) { r = lo; }
  if (r > hi) { r = hi; }
  return r;
}""",
    # ArgMax/Hardmax: the element equal to the row's statistic, a NaN matching a NaN (numpy's argmax).
    "same_nan": "fn same_nan(a: f32, b: f32) -> bool { return a == b || (is_nan(a) && is_nan(b)); }",
    # TopK and MaxPool order: NaN is above +inf (onnxruntime's TopK, numpy's sort).
    "less_nan": "fn less_nan(a: f32, b: f32) -> bool { if (is_nan(b)) { return !is_nan(a); } "
                "return !is_nan(a) && a < b; }",
    "keep_nan": "fn keep_nan(x: f32, r: f32) -> f32 { return select(r, x, is_nan(x)); }",
}


def helper_sources(text: str, table: dict[str, str] | None = None) -> list[str]:
    """Sources of the helpers (from ``table``, default FLOAT_HELPERS) that ``text`` calls, transitively, in
    the table's order (WGSL does not need declarations before use)."""
    table = FLOAT_HELPERS if table is None else table
    wanted: set[str] = set()
    todo = [text]
    while todo:
        chunk = todo.pop()
        for name, src in table.items():
            if name not in wanted and _calls(chunk, name):
                wanted.add(name)
                todo.append(src.split("{", 1)[1])  # the body: a helper does not call itself
    return [src for name, src in table.items() if name in wanted]


def _calls(text: str, name: str) -> bool:
    """``name(`` appears as a whole identifier (``max_nan(`` must not match ``fmax_nan(``)."""
    start = 0
    while (i := text.find(name + "(", start)) >= 0:
        if i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"):
            return True
        start = i + 1
    return False
