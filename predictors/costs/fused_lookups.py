"""Kernel time of a fused embedding lookup: the sum of its tables' lookups.

A fused group (``kernel: fused``, :mod:`predictors.model.embedding_blocks`) looks up several
tables in one kernel.  The kernel models know one table's lookup (its rows, pooling and
index distribution), so a fused op is priced as its tables' lookups, each a node of its
own shapes, summed, with the per-kernel floor paid once: one launch, and the tables'
bags fill the device together.
"""
from __future__ import annotations

__all__ = ["split_fused", "fused_seconds"]


def _parts(node: dict) -> list[dict]:
    return (node.get("lookup") or {}).get("parts") or []


# What each dimension of an embedding-bag op's tensors counts, in argument order (inputs,
# outputs): the stacked rows, the bags (tables x batch) or the indices ("lookups");
# None keeps the size (the embedding dim).
_FORWARD = ((("rows", None), ("lookups",), ("bags",)),
            (("bags", None), ("lookups",), ("bags",), ("bags",)))
_BACKWARD = ((("bags", None), ("lookups",), ("bags",), ("lookups",), ("bags",), ("bags",)),
             (("rows", None),))
_ROLES = {"aten::_embedding_bag": _FORWARD, "aten::embedding_bag": _FORWARD,
          "aten::_embedding_bag_forward_only": _FORWARD,
          "aten::_embedding_bag_backward": _BACKWARD,
          "aten::_embedding_bag_sparse_backward": _BACKWARD,
          # the sparse gradient ([rows, dim], one entry per index) and its parts
          "aten::_values": ((("rows", None),), (("lookups", None),)),
          "aten::_indices": ((("rows", None),), ((None, "lookups"),)),
          "aten::_sparse_coo_tensor_unsafe": (((None, "lookups"), ("lookups", None)),
                                              (("rows", None),))}


def _by_value(shape, sparse_shapes, totals) -> tuple:
    """Roles for a tensor of an op without a table: a sparse gradient's shape (and a dense
    tensor of that shape, the weight it updates) is [rows, dim]; any other size that
    equals the group's indices, bags or rows counts them, in that order."""
    if tuple(shape) in sparse_shapes:
        return ("rows",) + (None,) * (len(shape) - 1)
    order = ("lookups", "bags", "rows")
    return tuple(next((r for r in order if totals[r] == s), None) for s in shape)


def split_fused(node: dict) -> list[dict] | None:
    """``node`` as one node per table of its fused group (None: not a fused lookup).

    Each part keeps the op and swaps the group's sizes for its table's: the stacked rows
    for the table's, the group's bags (tables x batch) for the batch, all the indices (and
    a sparse gradient's nnz) for the table's lookups.  The embedding-bag ops' tensors are
    read by argument position; the sparse gradient's other ops by shape.
    """
    parts = _parts(node)
    if not parts:
        return None
    totals = {key: sum(p[key] for p in parts) for key in ("rows", "lookups", "bags")}
    sparse = {tuple(s) for s, n in zip(node["input_shapes"] + node["output_shapes"],
                                       node["input_nnz"] + node["output_nnz"])
              if n is not None}
    known = _ROLES.get(node["name"], ((), ()))

    def roles(shapes, listed):
        return [listed[i] if i < len(listed) and len(listed[i]) == len(s)
                else _by_value(s, sparse, totals) for i, s in enumerate(shapes)]

    in_roles = roles(node["input_shapes"], known[0])
    out_roles = roles(node["output_shapes"], known[1])
    out = []
    for p in parts:
        def scaled(shape, role):
            return tuple(p[r] if r is not None and s == totals[r] else s
                         for s, r in zip(shape, role))

        def nnz(values):
            return [None if v is None else p["lookups"] if v == totals["lookups"] else v
                    for v in values]

        out.append(dict(node, lookup={k: v for k, v in p.items()
                                      if k not in ("lookups", "bags")},
                        input_shapes=[scaled(s, r)
                                      for s, r in zip(node["input_shapes"], in_roles)],
                        output_shapes=[scaled(s, r)
                                       for s, r in zip(node["output_shapes"], out_roles)],
                        input_nnz=nnz(node["input_nnz"]),
                        output_nnz=nnz(node["output_nnz"])))
    return out


def fused_seconds(seconds: list[float], floor_s: float) -> float:
    """One kernel for the tables' lookups: their sum, the kernel floor counted once, and
    never less than the longest."""
    if not seconds:
        return 0.0
    return max(max(seconds), sum(seconds) - (len(seconds) - 1) * floor_s)
