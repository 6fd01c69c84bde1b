"""Constant weights larger than one binding (the limits tier's ``max_binding_bytes``): stored as several
weights split along their leading axis, each within the limit, for the lowerings that read rows of them
(Gather and GatherQ: an index reads one row; MatMulQ: a row per output column, its N-major words, block
parameters and bias). A 151,936 x 896 f32 embedding (544 MB) is five parts of at most 128 MiB."""

from __future__ import annotations

ROW_ALIGN = 64  # part boundaries on whole GEMV/GEMM column tiles


def row_parts(ctx, tensors: list) -> list[tuple[int, int, list]] | None:
    """``tensors`` (constants sharing their leading axis; None entries pass through) as parts
    ``(first row, end row, [part tensors])`` each within one binding; None when every tensor already fits
    or one is not a constant (the dispatch then names what exceeds the limit)."""
    limit = ctx.limits["max_binding_bytes"]
    present = [t for t in tensors if t is not None]
    if all(not isinstance(t.numel, int) or t.numel * 4 <= limit for t in present):
        return None
    if any(t.value is None or t.alias is not None or t.rank == 0 for t in present):
        return None
    rows = int(present[0].shape[0])
    if any(int(t.shape[0]) != rows for t in present):
        return None
    row_bytes = max(4 * (t.numel // max(rows, 1)) for t in present)
    per = limit // row_bytes
    if per >= ROW_ALIGN:
        per -= per % ROW_ALIGN
    if per < 1:
        return None
    count = -(-rows // per)
    size = -(-rows // count)  # balanced parts, still on whole tiles where that keeps them within the limit
    aligned = -(-size // ROW_ALIGN) * ROW_ALIGN
    size = aligned if aligned <= per else size
    memo = ctx._l.split_parts
    parts = []
    for lo in range(0, rows, size):
        hi = min(rows, lo + size)
        part = []
        for t in tensors:
            if t is None:
                part.append(None)
                continue
            key = (id(t.value), lo, hi)
            if key not in memo:  # the embedding and a tied head read the same parts
                memo[key] = (t.value, ctx._l.constant(t.value[lo:hi]))
            part.append(memo[key][1])
        parts.append((lo, hi, part))
    return parts
