"""Kernel time of a fused embedding lookup: the sum of its tables' lookups.

A fused group (``kernel: fused``, :mod:`predictors.embedding_blocks`) looks up several
tables in one kernel.  The kernel models know one table's lookup (its rows, pooling and
index distribution), so a fused op is priced as its tables' lookups, each a node of its
own shapes, summed, with the per-kernel floor paid once: one launch, and the tables'
bags fill the device together.
"""
from __future__ import annotations

__all__ = ["split_fused", "fused_seconds"]


def _parts(node: dict) -> list[dict]:
    return (node.get("lookup") or {}).get("parts") or []


def split_fused(node: dict) -> list[dict] | None:
    """``node`` as one node per table of its fused group (None: not a fused lookup).

    Each part keeps the op and swaps the group's sizes for its table's: the stacked rows
    for the table's, the group's bags (tables x batch) for the batch, all the indices (and
    a sparse gradient's nnz) for the table's lookups.
    """
    parts = _parts(node)
    if not parts:
        return None
    rows = sum(p["rows"] for p in parts)
    lookups = sum(p["lookups"] for p in parts)
    bags = sum(p["bags"] for p in parts)
    dim = parts[0]["dim"]
    out = []
    for p in parts:
        # a weight or gradient is [rows, dim], pooled output [bags, dim], values [lookups,
        # dim]; a 1-D tensor is indices (lookups) or per-bag offsets and sizes.  Where two
        # of the group's sizes coincide, the later key wins.
        by_rows = {lookups: p["lookups"], bags: p["bags"], rows: p["rows"]}
        by_len = {rows: p["rows"], bags: p["bags"], lookups: p["lookups"]}

        def scaled(shape):
            if len(shape) == 2 and shape[1] == dim:
                return (by_rows.get(shape[0], shape[0]), dim)
            return tuple(by_len.get(s, s) for s in shape)

        def nnz(values):
            return [None if v is None else p["lookups"] if v == lookups else v
                    for v in values]

        out.append(dict(node, lookup={k: v for k, v in p.items()
                                      if k not in ("lookups", "bags")},
                        input_shapes=[scaled(s) for s in node["input_shapes"]],
                        output_shapes=[scaled(s) for s in node["output_shapes"]],
                        input_nnz=nnz(node["input_nnz"]),
                        output_nnz=nnz(node["output_nnz"])))
    return out


def fused_seconds(seconds: list[float], floor_s: float) -> float:
    """One kernel for the tables' lookups: their sum, the kernel floor counted once, and
    never less than the longest."""
    if not seconds:
        return 0.0
    return max(max(seconds), sum(seconds) - (len(seconds) - 1) * floor_s)
